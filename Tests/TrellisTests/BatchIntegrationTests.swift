import Foundation
import Testing
import Trellis

@Suite("Batches of transfer tasks")
struct BatchIntegrationTests {
    @Test(arguments: TransportKind.allCases)
    func awaitAllRunsAtMostTheGivenNumberAtOnceAndKeepsTheOrder(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            let blobs = (0..<6).map { Blob(size: 256 * 1024 + $0, seed: UInt64($0)) }
            for (index, blob) in blobs.enumerated() { shelf["f\(index)"] = blob }
            let client = Client(baseURL: url, transport: kind.transport)
            let tasks = try (0..<6).map { index in
                client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/f\(index)")), as: Data.self)
            }
            let values = try await tasks.awaitAll(maxConcurrency: 2)
            #expect(values.map(\.count) == blobs.map(\.bytes.readableBytes))
            #expect(values == blobs.map(\.data))
            #expect(shelf.mostInFlight <= 2)
            #expect(shelf.rangesSeen.count == 6)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func theFirstFailureOfAwaitAllCancelsTheRest(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            shelf["slow"] = Blob(size: 4 * 1024 * 1024, seed: 1)
            shelf.stall("slow")
            let client = Client(baseURL: url, transport: kind.transport)
            let slow = client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/slow")), as: Data.self)
            let missing = client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/missing")), as: Data.self)
            let error = await #expect(throws: TrellisError.self) {
                try await [slow, missing].awaitAll(maxConcurrency: 2)
            }
            guard case .unacceptableStatus(let failure) = error else {
                Issue.record("expected unacceptableStatus, got \(String(describing: error))")
                return
            }
            #expect(failure.status == .notFound)
            let slowOutcome = await slow.result
            guard case .failure(let slowError) = slowOutcome, slowError is CancellationError else {
                Issue.record("expected the stalled task to be cancelled, got \(slowOutcome)")
                return
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func awaitAllResultsReportsEachOutcomeInOrder(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            shelf["a"] = Blob(size: 10, seed: 1)
            shelf["c"] = Blob(size: 30, seed: 3)
            let client = Client(baseURL: url, transport: kind.transport)
            let tasks = try ["a", "b", "c"].map { name in
                client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/\(name)")), as: Data.self)
            }
            let results = await tasks.awaitAllResults()
            #expect(results.count == 3)
            #expect((try? results[0].get())?.count == 10)
            #expect((try? results[1].get()) == nil)
            #expect((try? results[2].get())?.count == 30)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func awaitFirstReturnsTheFirstSuccessAndCancelsTheOthers(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            shelf["stalled"] = Blob(size: 4 * 1024 * 1024, seed: 1)
            shelf.stall("stalled")
            shelf["quick"] = Blob(size: 1000, seed: 2)
            let client = Client(baseURL: url, transport: kind.transport)
            let stalled = client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/stalled")), as: Data.self)
            let failing = client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/none")), as: Data.self)
            let quick = client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/quick")), as: Data.self)
            let first = try await [stalled, failing, quick].awaitFirst()
            #expect(first == shelf["quick"]!.data)
            let stalledOutcome = await stalled.result
            guard case .failure(let error) = stalledOutcome, error is CancellationError else {
                Issue.record("expected the stalled task to be cancelled, got \(stalledOutcome)")
                return
            }
        }
    }

    @Test func aTaskCancelledBeforeItStartsSendsNothing() async throws {
        try await withTransferServer { url, shelf in
            shelf["a"] = Blob(size: 10, seed: 1)
            let client = Client(baseURL: url)
            let task = client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/a")), as: Data.self)
            task.cancel()
            let outcome = await task.result
            guard case .failure(let error) = outcome, error is CancellationError else {
                Issue.record("expected CancellationError, got \(outcome)")
                return
            }
            #expect(shelf.rangesSeen.isEmpty)
            #expect(task.progress.current.isFinished)
        }
    }

    @Test func dataTaskProgressCountsTheResponseBody() async throws {
        try await withTransferServer { url, shelf in
            shelf["a"] = Blob(size: 3 * 1024 * 1024, seed: 1)
            let client = Client(baseURL: url)
            let task = client.dataTask(for: try Request(method: .get, url: url.appending(path: "files/a")), as: Data.self)
            let (data, updates) = try await recordingProgress(of: task)
            #expect(data.count == 3 * 1024 * 1024)
            #expect(updates.last?.completedBytes == Int64(data.count))
            #expect(updates.last?.totalBytes == Int64(data.count))
            #expect(updates.last?.isFinished == true)
        }
    }
}
