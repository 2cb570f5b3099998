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

    /// Four processes call until the test stops them, while the test expires the tokens five
    /// times (the authorization server takes them back, as their expiry would): no call fails,
    /// the server never sees a refresh token twice, and it sees one refresh per expiry, not one
    /// per process. Time is the test's: a token expires when the test says, once every process
    /// has been answered with it, so a slow machine changes nothing; a fleet that refreshed
    /// twice would use a refresh token twice, or refresh more than five times.
    @Test func fourProcessesRefreshOncePerExpiry() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let server = RotatingTokenServer(lifetime: .seconds(3600))
            try await TestServer.with(server.install) { url in
                let storage = PostgresAccessTokenStorage(client: postgres, timeLimit: .patientStoreLimit)
                try await storage.createTable()
                let pair = server.login()
                try await storage.store(
                    AccessToken(accessToken: pair.access, refreshToken: pair.refresh, expiresIn: 3600), for: AccessTokenRequirement.defaultLabel
                )
                let stop = FileManager.default.temporaryDirectory.appending(path: "trellis-stop-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: stop) }
                let workers = try await FleetWorker.start(4, ["tokens", database.socket, url.absoluteString, "until:\(stop.path)"])
                // A token expires once every process has been answered with it: no process has
                // a call with an older token under way, whose replay the expiry would refuse.
                var answered = server.answeredWithNewest.makeAsyncIterator()
                /// Whether every process was answered with the newest token (not: a refresh
                /// token was used twice, or a token refreshed twice).
                func everyProcessUsesTheNewestToken() async -> Bool {
                    while let count = await answered.next() {
                        if count < 0 { return false }
                        if count == workers.count { return true }
                    }
                    return false
                }
                for _ in 1...5 {
                    guard await everyProcessUsesTheNewestToken() else { break }
                    server.expireAccessTokens()
                }
                _ = await everyProcessUsesTheNewestToken()
                try Data().write(to: stop)
                var outputs: [String] = []
                for worker in workers { outputs.append(await worker.output()) }
                #expect(outputs.allSatisfy { $0.hasPrefix("answered") && $0.contains(" failed 0") }, "\(outputs)")
                #expect(server.reuses == 0)
                #expect(server.refreshes == 5)
            }
        }
    }

    /// A database whose stored token has expired, an authorization server that rotates refresh
    /// tokens and holds every refresh, and a worker started with `arguments` (the `tokens` mode
    /// and `extra`) whose refresh the server now holds, so that it holds the fleet's lock: runs
    /// `body` with them.
    private static func withAHeldRefresh(
        lifetime: Duration = .seconds(3600),
        _ extra: [String] = [],
        _ body: (_ server: RotatingTokenServer, _ holder: FleetWorker, _ arguments: [String], _ postgres: PostgresClient) async throws -> Void
    ) async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let server = RotatingTokenServer(lifetime: lifetime)
            try await TestServer.with(server.install) { url in
                let storage = PostgresAccessTokenStorage(client: postgres, timeLimit: .patientStoreLimit)
                try await storage.createTable()
                try await storage.store(PostgresAccessTokenTests.expiredLogin(server), for: AccessTokenRequirement.defaultLabel)
                let arguments = ["tokens", database.socket, url.absoluteString, "0"] + extra
                server.holdRefreshes()
                let holder = try await FleetWorker(arguments)
                for await _ in server.heldRefreshes { break }
                try await body(server, holder, arguments, postgres)
            }
        }
    }

    /// The authorization server holds the refresh of the process that took the lock; the
    /// other processes wait for it as long as their calls allow (not a fixed wait), and are
    /// still waiting well past the bound the next test sets: once it answers, every process's
    /// call succeeds with the one new token, and no refresh token is used twice.
    @Test func waitingProcessesWaitForTheHoldersRefreshAsLongAsTheirCallsAllow() async throws {
        try await Self.withAHeldRefresh { server, holder, arguments, postgres in
            let waiters = try await FleetWorker.start(3, arguments)
            try await Self.untilWaitersQueueForTheLock(postgres, count: 3, waitingAtLeast: "2 seconds")
            server.answerHeldRefreshes()
            var outputs = [await holder.output()]
            for waiter in waiters { outputs.append(await waiter.output()) }
            #expect(outputs.allSatisfy { $0.hasPrefix("answered 1 failed 0") }, "\(outputs)")
            #expect(server.refreshes == 1)
            #expect(server.reuses == 0)
        }
    }

    /// With `lockWait` set (half a second), a process that waits longer for another's refresh
    /// gives up, and its call fails naming that wait and the setting: not the `25P02` of the
    /// statement after it. The holder's refresh goes on, and is the only one.
    @Test func aWaitBoundedByLockWaitEndsNamingIt() async throws {
        try await Self.withAHeldRefresh(["500"]) { server, holder, arguments, _ in
            var outputs: [String] = []
            for waiter in try await FleetWorker.start(3, arguments) { outputs.append(await waiter.output()) }
            server.answerHeldRefreshes()
            let held = await holder.output()
            #expect(held.hasPrefix("answered 1 failed 0"), "\(held)")
            for output in outputs {
                #expect(output.hasPrefix("answered 0 failed 1"), "\(output)")
                #expect(output.contains("ran out after 0.5 seconds (lockWait: 0.5 seconds)"), "\(output)")
                #expect(!output.contains("25P02"), "\(output)")
            }
            #expect(server.refreshes == 1)
            #expect(server.reuses == 0)
        }
    }

    /// The process holding the refresh lock is killed (SIGKILL) while the authorization server
    /// holds its refresh: PostgreSQL ends its session and releases the lock, and the process
    /// that was waiting refreshes and answers.
    @Test func aKilledRefresherReleasesTheLock() async throws {
        try await Self.withAHeldRefresh(lifetime: .seconds(60)) { server, holder, arguments, postgres in
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
    /// Returns once `count` sessions have waited for an advisory lock for at least `interval`
    /// (PostgreSQL's interval syntax), by the database's own record of when each began.
    static func untilWaitersQueueForTheLock(_ postgres: PostgresClient, count: Int, waitingAtLeast interval: String) async throws {
        while true {
            let rows = try await postgres.query(PostgresQuery(unsafeSQL: """
                SELECT count(*)::int FROM pg_locks
                WHERE locktype = 'advisory' AND NOT granted AND waitstart < now() - interval '\(interval)'
                """))
            for try await waiting in rows.decode(Int.self) where waiting >= count { return }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

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

    /// The worker's process id.
    var pid: pid_t { process.processIdentifier }

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
