#if SQLite
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SQLiteNIO
import Testing
import Trellis
import TrellisSQLite
import TrellisTesting

@Suite("The outbox, on SQLite, against a server that keeps the draft's promises")
struct OutboxTests {
    private static func file() -> String {
        FileManager.default.temporaryDirectory.appending(path: "trellis-outbox-\(UUID().uuidString).sqlite").path
    }

    private static func order(_ url: URL, _ number: Int) throws -> Request {
        var request = try Request(method: .post, url: url.appending(path: "orders"))
        request.body = RequestBody(#"{"item":"\#(number)"}"#, contentType: "application/json")
        request.idempotencyKey = IdempotencyKey("call-\(number)")
        return request
    }

    private static let quickRetries = OutboxSettings(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(50))

    /// Runs `outbox` until `count` outcomes have come, and returns them.
    private static func outcomes(_ count: Int, of outbox: Outbox) async throws -> [OutboxOutcome] {
        let delivery = Task { try await outbox.run() }
        defer { delivery.cancel() }
        var outcomes: [OutboxOutcome] = []
        for await outcome in outbox.outcomes {
            outcomes.append(outcome)
            if outcomes.count == count { break }
        }
        return outcomes
    }

    /// The proof by killing. A worker process enqueues 1,000 orders and delivers them; it is
    /// killed with SIGKILL when the server has seen a chosen number of deliveries, which falls
    /// in the middle of enqueueing and of deliveries in flight (a request sent, its answer not
    /// yet stored). Meanwhile every third order is refused once, which leaves a backlog; a
    /// second worker on the same file is killed the same way while it delivers that backlog,
    /// and a third finishes. The server carried out each order whose enqueue
    /// returned, once, and no other, except at most the one enqueue the kill cut off after it
    /// was stored.
    @Test(.timeLimit(.minutes(5)))
    func callsSurviveWorkersKilledWhileEnqueueingAndDelivering() async throws {
        let orders = IdempotentServer()
        let target = NIOLockedValueBox<(pid: pid_t?, killAt: Int)>((nil, 0))
        let seen = NIOLockedValueBox(0)
        let firstPhase = NIOLockedValueBox(true)
        let refusedOnce = NIOLockedValueBox(Set<Int>())
        try await ScriptedServer.with({ received in
            let number = seen.withLockedValue { $0 += 1; return $0 }
            let kill = target.withLockedValue { target -> pid_t? in
                guard number >= target.killAt, let pid = target.pid else { return nil }
                target.pid = nil
                return pid
            }
            if let kill { _ = Foundation.kill(kill, SIGKILL) }
            // While the first worker runs, every third order is refused once for now, so that
            // a backlog is left for the second worker to be killed in the middle of.
            if firstPhase.withLockedValue({ $0 }), let key = received.field("Idempotency-Key"),
                let number = Int(key.filter(\.isNumber)), number % 3 == 0,
                refusedOnce.withLockedValue({ $0.insert(number).inserted })
            {
                return ScriptedServer.response("503 Service Unavailable")
            }
            return orders.script(received)
        }) { server in
            let file = Self.file()
            defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) } }
            let url = server.url.absoluteString

            // Each worker starts behind a gate, so that it sends nothing before its kill is set.
            let gates = (0..<2).map { Self.file() + ".gate\($0)" }
            defer { for gate in gates { try? FileManager.default.removeItem(atPath: gate) } }
            let first = try await OutboxWorker(["outbox", file, url, "1000", gates[0]])
            target.withLockedValue { $0 = (first.pid, Int.random(in: 50...300)) }
            _ = FileManager.default.createFile(atPath: gates[0], contents: Data())
            let firstOutput = await first.output()
            let enqueued = firstOutput.split(separator: "\n").compactMap { $0.hasPrefix("enqueued ") ? Int($0.dropFirst(9)) : nil }
            #expect(!firstOutput.contains("drained"), "killed before it finished: \(firstOutput.suffix(200))")
            #expect(!enqueued.isEmpty && enqueued.count < 1000, "killed while it enqueued: \(enqueued.count) enqueues returned")
            #expect(enqueued == Array(0..<enqueued.count), "enqueues return in order")

            firstPhase.withLockedValue { $0 = false }
            let backlog = enqueued.count + 1 - orders.carriedOut.count
            let second = try await OutboxWorker(["outbox", file, url, "0", gates[1]])
            target.withLockedValue { $0 = (second.pid, seen.withLockedValue { $0 } + Int.random(in: 1...max(1, backlog / 2))) }
            _ = FileManager.default.createFile(atPath: gates[1], contents: Data())
            let secondOutput = await second.output()
            // The second may have finished before its kill came: no kill for a later process.
            target.withLockedValue { $0.pid = nil }

            let third = try await OutboxWorker(["outbox", file, url, "0"])
            let thirdOutput = await third.output()
            #expect(thirdOutput.contains("drained"), "\(thirdOutput.suffix(300))")

            let carried = orders.carriedOut
            let returned = Set(enqueued.map { "call-\($0)" })
            let extra = Set(carried).subtracting(returned)
            #expect(returned.isSubset(of: Set(carried)), "lost: \(returned.subtracting(carried).sorted())")
            #expect(extra.isEmpty || extra == ["call-\(enqueued.count)"], "carried out without an enqueue that returned: \(extra.sorted())")
            #expect(carried.count == Set(carried).count, "an order carried out twice")
            #expect(orders.arrivals >= carried.count)
            #expect(!secondOutput.contains("drained") || backlog < 2, "the second worker was killed while it delivered a backlog of \(backlog)")
        }
    }

    /// Within a lane, calls go in the order they were enqueued, each after the one before has
    /// its final answer, even when one must be sent again; another lane does not wait for it.
    /// On each transport, since a delivery is an ordinary call through it.
    @Test(.timeLimit(.minutes(3)), arguments: TransportKind.allCases)
    func aLaneKeepsItsOrderAndLanesGoIndependently(_ kind: TransportKind) async throws {
        let orders = IdempotentServer()
        let failedOnce = NIOLockedValueBox(false)
        try await ScriptedServer.with({ received in
            // The lane's third call fails once before it is carried out.
            if String(decoding: received.body, as: UTF8.self).contains(#""item":"2""#),
                failedOnce.withLockedValue({ failed in
                    defer { failed = true }
                    return !failed
                })
            {
                return ScriptedServer.response("503 Service Unavailable")
            }
            return orders.script(received)
        }) { server in
            let file = Self.file()
            let client = Client(baseURL: server.url, transport: kind.transport)
            let outbox = Outbox(client: client, storage: try await SQLiteOutboxStorage(path: file), settings: Self.quickRetries)
            for number in 0..<10 { try await outbox.enqueue(Self.order(server.url, number), lane: "account-1") }
            try await outbox.enqueue(Self.order(server.url, 100), lane: "account-2")
            let outcomes = try await Self.outcomes(11, of: outbox)
            #expect(outcomes.count == 11)
            let laneOne = orders.carriedOut.filter { $0 != "call-100" }
            #expect(laneOne == (0..<10).map { "call-\($0)" }, "in the order enqueued: \(laneOne)")
            #expect(try await outbox.pending().isEmpty)
        }
    }

    /// While a lane's first call is in flight, the deliverers with nothing else to claim wait
    /// for it to end, rather than asking the storage again and again.
    @Test(.timeLimit(.minutes(3)))
    func deliverersWaitForALanesCallInFlightWithoutSpinning() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("201 Created")) }) { server in
            let storage = ClaimCounting(try await SQLiteOutboxStorage(path: Self.file()))
            let outbox = Outbox(client: Client(baseURL: server.url), storage: storage, settings: Self.quickRetries)
            for number in 0..<6 { try await outbox.enqueue(Self.order(server.url, number), lane: "one") }
            let delivery = Task { try await outbox.run() }
            defer { delivery.cancel() }
            var arrivals = server.arrivals.makeAsyncIterator()
            _ = await arrivals.next()
            let claimsWhenSent = storage.claims
            // An absence cannot be awaited: a spinning deliverer would claim hundreds of times
            // in this quarter of a second; waiting ones claim none.
            try await Task.sleep(for: .milliseconds(250))
            #expect(storage.claims - claimsWhenSent <= 4, "claims while the lane's call was in flight: \(storage.claims - claimsWhenSent)")
            server.releaseHeld()
            _ = await arrivals.next()
            server.releaseHeld()
        }
    }

    /// A final refusal is a dead letter, kept with the server's answer; it can be retried, and
    /// removed. A call that keeps failing is one after `maximumAttempts`.
    @Test(.timeLimit(.minutes(3)))
    func finalRefusalsAndRepeatedFailuresAreDeadLettersKeptWithTheirAnswer() async throws {
        let refuse = NIOLockedValueBox(true)
        try await ScriptedServer.with({ received in
            if received.field("Idempotency-Key")?.contains("call-2") == true {
                return ScriptedServer.response("503 Service Unavailable")
            }
            return refuse.withLockedValue { $0 }
                ? ScriptedServer.response("400 Bad Request", ["Content-Type: application/problem+json"], body: #"{"title":"no such item"}"#)
                : ScriptedServer.response("201 Created")
        }) { server in
            var settings = Self.quickRetries
            settings.maximumAttempts = 3
            let outbox = Outbox(client: Client(baseURL: server.url), storage: try await SQLiteOutboxStorage(path: Self.file()), settings: settings)
            let refused = try await outbox.enqueue(Self.order(server.url, 1))
            let failing = try await outbox.enqueue(Self.order(server.url, 2), lane: "other")
            _ = try await Self.outcomes(2, of: outbox)
            let dead = try await outbox.deadLetters()
            #expect(dead.map(\.id).sorted() == [refused, failing].sorted())
            let refusal = try #require(dead.first { $0.id == refused })
            #expect(refusal.finalAnswer?.status.code == 400)
            let refusalBody = String(decoding: refusal.finalAnswer?.body ?? Data(), as: UTF8.self)
            #expect(refusalBody.contains("no such item"))
            let failure = try #require(dead.first { $0.id == failing })
            #expect(failure.finalAnswer == nil && failure.lastFailure?.contains("maximumAttempts") == true)
            #expect(server.requests.filter { $0.field("Idempotency-Key")?.contains("call-2") == true }.count == 3)

            refuse.withLockedValue { $0 = false }
            try await outbox.retry(refused)
            let outcomes = try await Self.outcomes(1, of: outbox)
            guard case .delivered(let id, let status) = outcomes.first else { Issue.record("\(outcomes)"); return }
            #expect(id == refused && status.code == 201)
            try await outbox.remove(failing)
            #expect(try await outbox.deadLetters().isEmpty)
        }
    }

    /// What the outbox will not take is refused at `enqueue`, naming why, and what it holds is
    /// still there: a full outbox, a body over the limit, a streamed body.
    @Test func whatCannotBeStoredIsRefusedAtEnqueueAndNothingIsLost() async throws {
        let url = URL(string: "http://127.0.0.1:9/")!
        var settings = OutboxSettings(maximumEntries: 3, maximumPayloadSize: 64)
        settings.concurrency = 1
        let outbox = Outbox(client: Client(baseURL: url), storage: try await SQLiteOutboxStorage(path: Self.file()), settings: settings)
        for number in 0..<3 { try await outbox.enqueue(Self.order(url, number)) }
        do {
            try await outbox.enqueue(Self.order(url, 3))
            Issue.record("a fourth call was taken")
        } catch let error as OutboxError {
            #expect(error.reason == .full && error.description.contains("maximumEntries"))
        }
        var large = try Self.order(url, 4)
        large.body = RequestBody(String(repeating: "x", count: 65), contentType: "text/plain")
        await #expect(throws: OutboxError.self) { try await outbox.enqueue(large) }
        var streamed = try Self.order(url, 5)
        streamed.body = RequestBody(stream: AsyncStream<ByteBuffer> { $0.finish() })
        do {
            try await outbox.enqueue(streamed)
            Issue.record("a streamed body was taken")
        } catch let error as OutboxError {
            #expect(error.reason == .bodyCannotBeStored && error.description.contains("streamed body"))
        }
        #expect(try await outbox.pending().map(\.idempotencyKey) == ["call-0", "call-1", "call-2"])
    }

    /// A call that waits past ``OutboxSettings/maximumAge`` (its server refusing it for now) is
    /// a dead letter the next time it is due, naming the limit, without being sent again; the
    /// call of another lane is delivered meanwhile, and nothing else is touched. Time is the
    /// test's clock.
    @Test(.timeLimit(.minutes(3)))
    func aCallPastItsMaximumAgeIsADeadLetterNamingTheLimit() async throws {
        try await ScriptedServer.with({ received in
            received.field("Idempotency-Key")?.contains("call-1") == true ? ScriptedServer.response("503 Service Unavailable") : ScriptedServer.response("201 Created")
        }) { server in
            let clock = ManualClock()
            let settings = OutboxSettings(maximumAge: .seconds(60), initialDelay: .seconds(1), maximumDelay: .seconds(1), concurrency: 1)
            let outbox = Outbox(client: Client(baseURL: server.url) { $0.clock = clock }, storage: try await SQLiteOutboxStorage(path: Self.file()), settings: settings)
            let waiting = try await outbox.enqueue(Self.order(server.url, 1), lane: "a")
            let delivered = try await outbox.enqueue(Self.order(server.url, 2), lane: "b")
            let delivery = Task { try await outbox.run() }
            defer { delivery.cancel() }
            var outcomes = outbox.outcomes.makeAsyncIterator()
            guard case .delivered(let id, _)? = await outcomes.next() else { Issue.record("no delivery"); return }
            #expect(id == delivered)
            // The deliverer waits for the refused call's next turn, a second away, and the
            // claims' renewal for its own: then the clock moves past the call's age.
            await clock.sleepers(reaching: 2)
            clock.advance(by: .seconds(61))
            guard case .deadLettered(let dead)? = await outcomes.next() else { Issue.record("no dead letter"); return }
            #expect(dead.id == waiting && dead.lastFailure?.contains("maximumAge") == true)
            #expect(try await outbox.deadLetters().map(\.id) == [waiting])
            #expect(try await outbox.pending().isEmpty)
            #expect(server.requests.filter { $0.field("Idempotency-Key")?.contains("call-1") == true }.count == 1)
        }
    }

    /// A hostile server's answers are met within the outbox's limits: a `Retry-After` of three
    /// years is waited out only as long as ``OutboxSettings/maximumDelay``; a refusal whose body
    /// is larger than the client takes is a failure counted to `maximumAttempts`, its dead
    /// letter naming the limit and keeping no body; an answer cut off in its head is sent again
    /// with its key until it is delivered.
    @Test(.timeLimit(.minutes(3)))
    func aHostileServersAnswersAreMetWithinTheLimits() async throws {
        let arrivals = NIOLockedValueBox<[String: Int]>([:])
        try await ScriptedServer.with({ received in
            let key = received.field("Idempotency-Key") ?? ""
            let arrival = arrivals.withLockedValue { $0[key, default: 0] += 1; return $0[key]! }
            if key.contains("call-1") {
                return arrival == 1 ? ScriptedServer.response("503 Service Unavailable", ["Retry-After: 99999999"]) : ScriptedServer.response("201 Created")
            }
            if key.contains("call-2") {
                return ScriptedServer.response("400 Bad Request", ["Content-Type: text/plain"], body: String(repeating: "x", count: 64 << 10))
            }
            return arrival < 3 ? ScriptedServer.thenClose("HTTP/1.1 20") : ScriptedServer.response("201 Created")
        }) { server in
            var settings = Self.quickRetries
            settings.maximumAttempts = 3
            let client = Client(baseURL: server.url) { $0.limits.maximumBodySize = 4 << 10 }
            let outbox = Outbox(client: client, storage: try await SQLiteOutboxStorage(path: Self.file()), settings: settings)
            let patient = try await outbox.enqueue(Self.order(server.url, 1), lane: "a")
            let refused = try await outbox.enqueue(Self.order(server.url, 2), lane: "b")
            let cut = try await outbox.enqueue(Self.order(server.url, 3), lane: "c")
            var delivered: Set<Int64> = []
            var dead: [OutboxEntry] = []
            for outcome in try await Self.outcomes(3, of: outbox) {
                switch outcome {
                case .delivered(let id, _): delivered.insert(id)
                case .deadLettered(let entry): dead.append(entry)
                }
            }
            #expect(delivered == [patient, cut])
            #expect(dead.map(\.id) == [refused])
            #expect(dead.first?.finalAnswer == nil && dead.first?.lastFailure?.contains("maximumAttempts") == true, "\(dead)")
            #expect(arrivals.withLockedValue { $0 }.values.sorted() == [2, 3, 3])
        }
    }

    /// A disk that fills up (a small tmpfs, mounted for the test) refuses the `enqueue` that no
    /// longer fits, naming the storage's failure; the calls stored before are all there, and once
    /// there is room again the outbox takes calls and delivers every one.
    @Test(.enabled(if: getuid() == 0, "mounting a small tmpfs needs root"), .timeLimit(.minutes(3)))
    func aFullDiskRefusesTheEnqueueThatDoesNotFitAndLosesNothing() async throws {
        try await Self.withSmallDisk { folder in try await Self.fillUpThenMakeRoom(folder) }
    }

    private static func fillUpThenMakeRoom(_ folder: URL) async throws {
        // Most of the disk taken by something else, as a disk that fills up is.
        let filler = folder.appending(path: "filler")
        try Data(repeating: 0, count: (8 << 20) - (512 << 10)).write(to: filler)
        let orders = IdempotentServer()
        try await ScriptedServer.with(orders.script) { server in
            let outbox = Outbox(client: Client(baseURL: server.url), storage: try await SQLiteOutboxStorage(path: folder.appending(path: "outbox.sqlite").path))
            func order(_ number: Int) throws -> Request {
                var request = try Self.order(server.url, number)
                request.body = RequestBody(String(repeating: "\(number % 10)", count: 8 << 10), contentType: "text/plain")
                return request
            }
            var stored = 0
            var refusal: OutboxError?
            while refusal == nil, stored < 200 {
                do {
                    try await outbox.enqueue(order(stored))
                    stored += 1
                } catch let error as OutboxError {
                    refusal = error
                }
            }
            let error = try #require(refusal, "the disk never filled")
            #expect(error.reason == .storageFailed && error.description.contains("full"), "\(error)")
            #expect(stored > 0)
            #expect(try await outbox.pending().map(\.idempotencyKey) == (0..<stored).map { "call-\($0)" })

            try FileManager.default.removeItem(at: filler)
            try await outbox.enqueue(order(stored))
            let delivery = Task { try await outbox.run() }
            defer { delivery.cancel() }
            var outcomes = outbox.outcomes.makeAsyncIterator()
            for _ in 0...stored {
                guard case .delivered? = await outcomes.next() else { Issue.record("a call was not delivered"); return }
            }
            #expect(Set(orders.carriedOut) == Set((0...stored).map { "call-\($0)" }))
        }
    }

    /// The disk fills up while a call is delivered, between the server's answer and its record:
    /// the outbox records it again and again until there is room, and the lane goes on after it
    /// (left marked as being delivered, the call held its lane until a restart). Each call
    /// arrives once, in its lane's order.
    @Test(.enabled(if: getuid() == 0, "mounting a small tmpfs needs root"), .timeLimit(.minutes(3)))
    func aDeliveryTheDiskHasNoRoomToRecordIsRecordedOnceThereIsRoom() async throws {
        try await Self.withSmallDisk { folder in try await Self.fillUpWhileDelivering(folder) }
    }

    private static func fillUpWhileDelivering(_ folder: URL) async throws {
        let filler = folder.appending(path: "filler")
        let orders = IdempotentServer()
        let filled = NIOLockedValueBox(false)
        try await ScriptedServer.with({ received in
            // The first delivery's answer leaves the disk full.
            if filled.withLockedValue({ filled in defer { filled = true }; return !filled }) {
                _ = FileManager.default.createFile(atPath: filler.path, contents: nil)
                if let handle = try? FileHandle(forWritingTo: filler) {
                    while (try? handle.write(contentsOf: Data(count: 64 << 10))) != nil {}
                    try? handle.close()
                }
            }
            return orders.script(received)
        }) { server in
            let storage = ClaimCounting(try await SQLiteOutboxStorage(path: folder.appending(path: "outbox.sqlite").path))
            let outbox = Outbox(client: Client(baseURL: server.url), storage: storage, settings: Self.quickRetries)
            for number in 0..<3 { try await outbox.enqueue(Self.order(server.url, number), lane: "one") }
            let delivery = Task { try await outbox.run() }
            defer { delivery.cancel() }
            var outcomes = outbox.outcomes.makeAsyncIterator()
            // Room again once the outbox has failed to record the first delivery twice.
            while storage.deliveriesNotRecorded < 2 { await Task.yield() }
            try FileManager.default.removeItem(at: filler)
            for _ in 0..<3 {
                guard case .delivered? = await outcomes.next() else { Issue.record("a call was not delivered"); return }
            }
            #expect(orders.carriedOut == ["call-0", "call-1", "call-2"])
            #expect(orders.arrivals == 3)
            #expect(try await outbox.pending().isEmpty)
        }
    }

    /// Runs `body` with a folder on a tmpfs of 8 MiB of its own, then unmounts it and removes
    /// the folder. The unmount is lazy: a file the code under test still holds open (a storage
    /// whose delivery task is still ending) cannot keep the mount, nor the folder, behind.
    private static func withSmallDisk(_ body: (URL) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "trellis-full-disk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", folder.path])
        defer {
            try? run("/usr/bin/umount", ["--lazy", folder.path])
            try? FileManager.default.removeItem(at: folder)
        }
        try await body(folder)
    }

    /// Runs `executable` with `arguments`, and throws when it fails.
    private static func run(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(filePath: executable)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw OutboxError(.storageFailed, "\(executable) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
    }

    /// A lock another connection holds on the file (an exclusive transaction, as another
    /// process's writer would hold it) is waited for at most `lockWait`: the `enqueue` fails
    /// then, naming the lock, nothing is lost, and once the lock is gone calls are taken again.
    @Test func aFileLockedByAnotherWriterIsWaitedForWithinLockWait() async throws {
        let path = Self.file()
        let url = URL(string: "http://127.0.0.1:9/")!
        let outbox = Outbox(client: Client(baseURL: url), storage: try await SQLiteOutboxStorage(path: path, lockWait: .milliseconds(100)))
        try await outbox.enqueue(Self.order(url, 1))
        let other = try await SQLiteConnection.open(storage: .file(path: path))
        _ = try await other.query("BEGIN EXCLUSIVE")
        do {
            try await outbox.enqueue(Self.order(url, 2))
            Issue.record("a call was stored while another writer held the file")
        } catch let error as OutboxError {
            #expect(error.reason == .storageFailed && error.description.contains("locked"), "\(error)")
        }
        _ = try await other.query("COMMIT")
        try await other.close()
        try await outbox.enqueue(Self.order(url, 3))
        #expect(try await outbox.pending().map(\.idempotencyKey) == ["call-1", "call-3"])
    }

    /// A file that is not an outbox is refused when it is opened, naming it; a file that is one
    /// opens again with its calls.
    @Test func aDamagedFileIsRefusedAndAnOutboxOpensAgainWithItsCalls() async throws {
        let damaged = Self.file()
        try Data(repeating: 0x5A, count: 4096).write(to: URL(filePath: damaged))
        do {
            _ = try await SQLiteOutboxStorage(path: damaged)
            Issue.record("a damaged file was opened")
        } catch let error as OutboxError {
            #expect(error.reason == .storageFailed && error.description.contains(damaged))
        }
        let path = Self.file()
        let url = URL(string: "http://127.0.0.1:9/")!
        let storage = try await SQLiteOutboxStorage(path: path)
        try await Outbox(client: Client(baseURL: url), storage: storage).enqueue(Self.order(url, 7), lane: "kept")
        try await storage.close()
        // Closed, the storage refuses to work, naming why, and goes without closing it again
        // (sqlite-nio 1.13.2 crashed the process on a second close, in a release build).
        await #expect(throws: OutboxError.self) { try await storage.entries(deadLetters: false) }
        try await storage.close()
        let reopened = try await Outbox(client: Client(baseURL: url), storage: SQLiteOutboxStorage(path: path)).pending()
        #expect(reopened.map(\.idempotencyKey) == ["call-7"] && reopened.first?.lane == "kept")
        #expect(reopened.first?.body.map { String(decoding: $0, as: UTF8.self) } == #"{"item":"7"}"#)
    }
}

/// A storage that counts the claims made of the one it wraps, and the deliveries it failed to
/// record.
final class ClaimCounting: OutboxStorage {
    private let storage: SQLiteOutboxStorage
    private let count = NIOLockedValueBox(0)
    private let failedRecords = NIOLockedValueBox(0)
    var claims: Int { count.withLockedValue { $0 } }
    var deliveriesNotRecorded: Int { failedRecords.withLockedValue { $0 } }

    init(_ storage: SQLiteOutboxStorage) {
        self.storage = storage
    }

    func insert(_ entry: OutboxEntry, limit: Int) async throws -> OutboxEntry? { try await storage.insert(entry, limit: limit) }
    func claimNext(at now: Date, leaseFor lease: Duration) async throws -> OutboxEntry? {
        count.withLockedValue { $0 += 1 }
        return try await storage.claimNext(at: now, leaseFor: lease)
    }
    func renewClaims(_ ids: [Int64], leaseFor lease: Duration) async throws { try await storage.renewClaims(ids, leaseFor: lease) }
    func releaseClaims() async throws { try await storage.releaseClaims() }
    func delivered(_ id: Int64) async throws {
        do {
            try await storage.delivered(id)
        } catch {
            failedRecords.withLockedValue { $0 += 1 }
            throw error
        }
    }
    func reschedule(_ id: Int64, notBefore: Date, failure: String) async throws { try await storage.reschedule(id, notBefore: notBefore, failure: failure) }
    func deadLetter(_ id: Int64, reason: String, answer: Response<Data>?) async throws { try await storage.deadLetter(id, reason: reason, answer: answer) }
    func entries(deadLetters: Bool) async throws -> [OutboxEntry] { try await storage.entries(deadLetters: deadLetters) }
    func remove(_ id: Int64) async throws { try await storage.remove(id) }
    func revive(_ id: Int64) async throws { try await storage.revive(id) }
    func nextDue(at now: Date) async throws -> Date? { try await storage.nextDue(at: now) }
}

/// A `trellis-fleet-worker` process running the outbox mode.
struct OutboxWorker: Sendable {
    private let process: ChildProcess
    private let log: URL

    var pid: pid_t { process.processIdentifier }

    init(_ arguments: [String]) async throws {
        log = FileManager.default.temporaryDirectory.appending(path: "trellis-outbox-worker-\(UUID().uuidString).log")
        let executable = URL(filePath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: "trellis-fleet-worker")
        process = try await ChildProcess(executable, arguments, output: .file(log))
    }

    /// What the worker printed, once it has ended (exited, or killed).
    func output() async -> String {
        _ = try? await process.terminationStatus()
        defer { try? FileManager.default.removeItem(at: log) }
        return (try? String(contentsOf: log, encoding: .utf8)) ?? ""
    }
}
#endif
