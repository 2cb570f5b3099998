// Four processes sharing one quota through PostgreSQL.
//
//     swift run --package-path Demo trellis-fleet-example postgres://USER@HOST:PORT/DATABASE
//
// Starts a small API on 127.0.0.1 that counts the calls it gets each second, then four copies
// of this program, each making 100 calls as fast as its client lets it under a rate limit of
// 50 calls a second shared through the database (the table is created if missing). Prints
// what the API saw each second: about 50, never the 200 the four would send alone.
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Trellis
import TrellisPostgres

let arguments = CommandLine.arguments
guard arguments.count >= 2, let database = URLComponents(string: arguments[1]), database.scheme?.hasPrefix("postgres") == true,
    let host = database.host
else {
    print("usage: trellis-fleet-example postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
    exit(2)
}
let postgres = PostgresClient(configuration: .init(
    host: host, port: database.port ?? 5432, username: database.user ?? "postgres", password: database.password,
    database: database.path.isEmpty ? nil : String(database.path.dropFirst()), tls: .disable
))

/// One process of the fleet: 100 calls to the API at `url`, under the shared quota.
func callAsOneProcess(_ url: URL) async throws {
    let store = PostgresRateLimitStorage(client: postgres)
    let client = Client(baseURL: url) {
        $0.resilience.rateLimit = RateLimit(
            requests: 50, per: .seconds(1), burst: 5, maximumWait: .seconds(60),
            sharing: RateLimitSharing(storage: store, batch: 5, whenStorageFails: .refuseCalls)
        )
    }
    let request = try Trellis.Request(method: .get, url: url.appending(path: "work"))
    for _ in 0..<100 { _ = try await client.data(for: request) }
}

/// The API, and four processes calling it; prints the calls it saw in each second.
func runTheFleet() async throws {
    let arrivals = NIOLockedValueBox<[ContinuousClock.Instant]>([])
    let router = Router()
    router.get("work") { _, _ in
        arrivals.withLockedValue { $0.append(.now) }
        return "done"
    }
    let (ports, port) = AsyncStream.makeStream(of: Int.self)
    var quiet = Logger(label: "fleet-example-api")
    quiet.logLevel = .critical
    let app = Application(
        router: router,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { port.yield($0.localAddress?.port ?? 0) },
        logger: quiet
    )
    let server = Task { try await app.run() }
    defer { server.cancel() }
    var iterator = ports.makeAsyncIterator()
    guard let apiPort = await iterator.next() else { return }
    try await PostgresRateLimitStorage(client: postgres).createTable()

    print("4 processes × 100 calls under 50 calls a second, shared through \(host)")
    let started = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<4 {
            group.addTask {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
                process.arguments = [arguments[1], "--process", "http://127.0.0.1:\(apiPort)"]
                let (exited, exit) = AsyncStream.makeStream(of: Void.self)
                process.terminationHandler = { _ in exit.finish() }
                try process.run()
                for await _ in exited {}
            }
        }
        try await group.waitForAll()
    }
    let seconds = arrivals.withLockedValue { $0 }.map { Int(($0 - started).components.seconds) }
    for second in 0...(seconds.max() ?? 0) {
        print("second \(second + 1): \(seconds.filter { $0 == second }.count) calls")
    }
}

try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { await postgres.run() }
    if arguments.count == 4, arguments[2] == "--process", let url = URL(string: arguments[3]) {
        try await callAsOneProcess(url)
    } else {
        try await runTheFleet()
    }
    group.cancelAll()
}
