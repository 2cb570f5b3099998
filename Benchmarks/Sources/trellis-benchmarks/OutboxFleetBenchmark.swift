import Foundation
import Hummingbird
import PostgresNIO
import Trellis
import TrellisPostgres

/// One PostgreSQL outbox drained by four processes against one (`trellis-benchmarks
/// outbox-drain`, started by this suite), on a database `TRELLIS_BENCH_POSTGRES` names
/// (`Benchmarks/with-postgres` starts one). The server takes 10 ms over each order, as a
/// server elsewhere would, so one process's four deliverers cap it near 400 calls a second;
/// the figure is how far more processes go past that, with the claims' `FOR UPDATE SKIP
/// LOCKED` and leases between them. The two sides take turns, round after round.
enum OutboxFleetBenchmark {
    static let calls = 2_000
    static let table = "trellis_bench_outbox"

    static func run(rounds: Int) async throws -> [Row] {
        let postgres = try FleetBenchmark.database(for: "outbox-fleet")
        return try await withThrowingTaskGroup(of: [Row].self) { group in
            group.addTask { await postgres.run(); return [] }
            defer { group.cancelAll() }
            return try await withServer({ router in
                router.post("orders") { _, _ in
                    try await Task.sleep(for: .milliseconds(10))
                    return Response(status: .created)
                }
            }) { url in
                let storage = PostgresOutboxStorage(client: postgres, table: table)
                try await storage.createTable()
                func drained(by processes: Int) async throws -> Double {
                    let outbox = Outbox(client: Client(baseURL: url), storage: storage, settings: OutboxSettings(maximumEntries: 1_000_000))
                    for number in 0..<calls {
                        var request = try Trellis.Request(method: .post, url: url.appending(path: "orders"))
                        request.body = Trellis.RequestBody(#"{"item":\#(number)}"#, contentType: "application/json")
                        try await outbox.enqueue(request, lane: "lane-\(number % 64)")
                    }
                    let seconds = try await milliseconds {
                        let children = try (0..<processes).map { _ in try drainer(url) }
                        for child in children { await exit(of: child) }
                    } / 1000
                    guard try await storage.entries(deadLetters: false).isEmpty else {
                        throw BenchmarkFailure(description: "the drainers left calls behind")
                    }
                    return Double(calls) / seconds
                }
                let (one, four) = try await alternated(rounds, { try await drained(by: 1) }, { try await drained(by: 4) })
                return [
                    Row(name: "a fleet's outbox, 4 processes", baseline: "1 process", baselineValue: mean(one), value: mean(four),
                        unit: "/s", note: "\(calls) calls in 64 lanes, each answered in 10 ms; mean of \(rounds) alternated rounds, processes' start included"),
                ]
            }
        }
    }

    /// `trellis-benchmarks outbox-drain URL`: delivers the outbox in PostgreSQL to URL, four at
    /// a time, and returns once nothing is left in it.
    static func drain(_ url: URL) async throws {
        let postgres = try FleetBenchmark.database(for: "outbox-drain")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await postgres.run() }
            defer { group.cancelAll() }
            let outbox = Outbox(
                client: Client(baseURL: url),
                storage: PostgresOutboxStorage(client: postgres, table: table, pollInterval: .milliseconds(10)),
                settings: OutboxSettings(maximumEntries: 1_000_000, concurrency: 4)
            )
            let delivery = Task { try await outbox.run() }
            defer { delivery.cancel() }
            while try await !outbox.pending().isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        }
    }

    private static func drainer(_ url: URL) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["outbox-drain", url.absoluteString]
        try process.run()
        return process
    }

    private static func exit(of process: Process) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                process.waitUntilExit()
                continuation.resume()
            }
        }
    }
}
