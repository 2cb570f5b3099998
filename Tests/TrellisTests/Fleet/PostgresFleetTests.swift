#if Postgres
import Foundation
import PostgresNIO
import Testing
import Trellis
import TrellisPostgres

/// Operating-system processes (`trellis-fleet-worker`, built beside the tests) sharing a rate
/// limit and access tokens through a real PostgreSQL server.
@Suite("A fleet of processes sharing state through PostgreSQL", .hangGuard)
struct PostgresFleetTests {
    /// Four processes, 25 calls each, under 50 a second with batches of 5: the server sees
    /// every call, and in no second more than the quota and a batch per process.
    @Test func fourProcessesKeepWithinOneQuota() async throws {
        try await PostgresRateLimitTests.withStore { postgres, _ in
            try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
                let workers = try await FleetWorker.start(4, ["rate-limit", postgres.socket, server.url.absoluteString, "25", "50", "5"])
                var outputs: [String] = []
                for worker in workers { outputs.append(await worker.output()) }
                #expect(outputs.allSatisfy { $0.hasPrefix("answered 25 failed 0") }, "\(outputs)")
                let arrivals = server.requests.map(\.arrived)
                #expect(arrivals.count == 100)
                let mostInASecond = arrivals.map { start in arrivals.filter { $0 >= start && $0 < start + .seconds(1) }.count }.max() ?? 0
                #expect(mostInASecond <= 50 + 4 * 5)
            }
        }
    }

    /// Eight processes start together and each creates the four stores' tables, as the
    /// article's example does at start: each succeeds, in three rounds on a new database each.
    /// `CREATE TABLE IF NOT EXISTS` alone failed 1 to 12 of 16 such creations with `23505`.
    @Test func processesThatStartTogetherCreateTheTablesTogether() async throws {
        for round in 1...3 {
            try await PostgresServer.withDatabase { database, _ in
                let gate = FileManager.default.temporaryDirectory.appending(path: "trellis-gate-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: gate) }
                let workers = try await FleetWorker.start(8, ["create-tables", database.socket, gate.path])
                try Data().write(to: gate)
                var outputs: [String] = []
                for worker in workers { outputs.append(await worker.output()) }
                #expect(outputs.allSatisfy { $0.hasPrefix("created") }, "round \(round): \(outputs)")
            }
        }
    }

    /// Four processes call for thirty seconds with tokens that live two (refreshed half a second
    /// before they expire): no call fails, the authorization server never sees a refresh token
    /// twice, and it sees at most one refresh per expiry, not one per process. The server takes
    /// a token for ten seconds past its stated two: a call slowed by a loaded machine reached it
    /// after them, and its replay after the refresh as well (each process failed one call so,
    /// under ThreadSanitizer beside busy loops). The clients refresh from the stated lifetime,
    /// so the grace leaves the count of refreshes as it is.
    @Test func fourProcessesRefreshOncePerExpiry() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let server = RotatingTokenServer(lifetime: .seconds(2), grace: .seconds(10))
            try await TestServer.with(server.install) { url in
                let storage = PostgresAccessTokenStorage(client: postgres, timeLimit: .patientStoreLimit)
                try await storage.createTable()
                let pair = server.login()
                try await storage.store(
                    AccessToken(accessToken: pair.access, refreshToken: pair.refresh, expiresIn: 2), for: AccessTokenRequirement.defaultLabel
                )
                let workers = try await FleetWorker.start(4, ["tokens", database.socket, url.absoluteString, "30"])
                var outputs: [String] = []
                for worker in workers { outputs.append(await worker.output()) }
                #expect(outputs.allSatisfy { $0.hasPrefix("answered") && $0.contains(" failed 0") }, "\(outputs)")
                #expect(server.reuses == 0)
                // At most a refresh every one and a half seconds over thirty, and one more at
                // each edge: one per expiry, where four processes alone would make four.
                #expect((1...22).contains(server.refreshes), "\(server.refreshes) refreshes")
            }
        }
    }

    /// The process holding the refresh lock is killed (SIGKILL) while the authorization server
    /// holds its refresh: PostgreSQL ends its session and releases the lock, and the process
    /// that was waiting refreshes and answers.
    @Test func aKilledRefresherReleasesTheLock() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let server = RotatingTokenServer(lifetime: .seconds(60))
            try await TestServer.with(server.install) { url in
                let storage = PostgresAccessTokenStorage(client: postgres, timeLimit: .patientStoreLimit)
                try await storage.createTable()
                try await storage.store(PostgresAccessTokenTests.expiredLogin(server), for: AccessTokenRequirement.defaultLabel)
                let arguments = ["tokens", database.socket, url.absoluteString, "0"]
                server.holdRefreshes()
                let holder = try await FleetWorker(arguments)
                for await _ in server.heldRefreshes { break }
                let waiter = try await FleetWorker(arguments)
                try await Self.untilAWaiterQueuesForTheLock(postgres)
                server.answerRefreshes()
                await holder.kill()
                let output = await waiter.output()
                server.releaseHeldRefreshes()
                #expect(output.hasPrefix("answered 1 failed 0"), "\(output)")
                #expect(server.refreshes == 1)
                #expect(server.reuses == 0)
            }
        }
    }

    /// Four processes start at once and each calls one URL, fresh for a minute, three times
    /// through a cache kept in PostgreSQL: the server sees one request. A process either finds
    /// the response stored, or misses, waits for the fleet's lock on the URL and then finds it.
    @Test func fourProcessesThatMissAtOnceFetchOnce() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            try await PostgresHTTPCacheStorage(client: postgres).createTable()
            try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", ["Cache-Control: max-age=60"], body: "the page") }) { server in
                let workers = try await FleetWorker.start(4, ["cache", database.socket, server.url.absoluteString, "3"])
                var outputs: [String] = []
                for worker in workers { outputs.append(await worker.output()) }
                #expect(outputs.allSatisfy { $0.hasPrefix("answered 3 failed 0") }, "\(outputs)")
                #expect(server.requests.count == 1)
            }
        }
    }

    /// Returns once a session waits for an advisory lock. PostgreSQL sends no signal for it, so
    /// `pg_locks` is read every 20 ms.
    static func untilAWaiterQueuesForTheLock(_ postgres: PostgresClient) async throws {
        while true {
            let rows = try await postgres.query("SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            for try await waiting in rows.decode(Int.self) where waiting > 0 { return }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// One `trellis-fleet-worker` process.
struct FleetWorker: Sendable {
    /// The worker, built beside the tests.
    static var executable: URL {
        URL(filePath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: "trellis-fleet-worker")
    }

    private let process: ChildProcess
    private let output: URL

    /// Starts a worker with `arguments`.
    init(_ arguments: [String]) async throws {
        output = FileManager.default.temporaryDirectory.appending(path: "trellis-fleet-worker-\(UUID().uuidString).log")
        process = try await ChildProcess(Self.executable, arguments, output: .file(output))
    }

    /// Starts `count` workers with `arguments`.
    static func start(_ count: Int, _ arguments: [String]) async throws -> [FleetWorker] {
        var workers: [FleetWorker] = []
        for _ in 0..<count { workers.append(try await FleetWorker(arguments)) }
        return workers
    }

    /// What the worker printed (its standard output and standard error), once it has exited.
    func output() async -> String {
        _ = try? await process.terminationStatus()
        defer { try? FileManager.default.removeItem(at: output) }
        return (try? String(contentsOf: output, encoding: .utf8)) ?? ""
    }

    /// Kills the worker with SIGKILL, as a crash or the out-of-memory killer would, and
    /// returns once it has ended.
    func kill() async {
        process.send(SIGKILL)
        _ = await output()
    }
}
#endif
