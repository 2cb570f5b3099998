import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Trellis
import TrellisPostgres

/// The policies a fleet shares through PostgreSQL, against the same policies kept in the
/// process, on a database `TRELLIS_BENCH_POSTGRES` names (`host:port`, user `trellis`, trust
/// authentication; `Benchmarks/with-postgres` starts one):
/// - the rate limit at 2,000 calls a second, taken by 16 callers: calls a second through the
///   shared limit over the local one, and the database's round trips per call;
/// - sequential calls with a good access token kept in `PostgresAccessTokenStorage` over the
///   same calls with it in memory, and the round trips they cost.
/// The two sides take turns, round after round; the ratio is the mean of the rounds' ratios.
enum FleetBenchmark {
    static let rateLimitCalls = 4_000
    static let tokenCalls = 2_000

    /// A store that counts the batches it gives, each one statement on the database.
    struct CountingStore: RateLimitStorage {
        let store: PostgresRateLimitStorage
        let batches = NIOLockedValueBox(0)

        func takeTurns(_ count: Int, of key: String, under limit: RateLimit) async throws -> [Duration] {
            batches.withLockedValue { $0 += 1 }
            return try await store.takeTurns(count, of: key, under: limit)
        }

        func hold(_ key: String, for duration: Duration, under limit: RateLimit) async throws {
            batches.withLockedValue { $0 += 1 }
            try await store.hold(key, for: duration, under: limit)
        }
    }

    /// A client of the database `TRELLIS_BENCH_POSTGRES` names, for `suite`.
    static func database(for suite: String) throws -> PostgresClient {
        guard let address = ProcessInfo.processInfo.environment["TRELLIS_BENCH_POSTGRES"],
            let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...])
        else {
            throw BenchmarkFailure(description: "the \(suite) suite needs TRELLIS_BENCH_POSTGRES=host:port (Benchmarks/with-postgres starts a database)")
        }
        return PostgresClient(configuration: .init(
            host: String(address[..<colon]), port: port, username: "trellis", password: nil, database: "postgres", tls: .disable
        ))
    }

    static func run(rounds: Int) async throws -> [Row] {
        let postgres = try database(for: "fleet")
        return try await withThrowingTaskGroup(of: [Row].self) { group in
            group.addTask { await postgres.run(); return [] }
            defer { group.cancelAll() }
            return try await withServer({ router in
                router.get("me") { _, _ in Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "{}"))) }
            }) { url in
                try await rateLimit(postgres, url, rounds: rounds) + accessTokens(postgres, url, rounds: rounds)
            }
        }
    }

    private static func rateLimit(_ postgres: PostgresClient, _ url: URL, rounds: Int) async throws -> [Row] {
        let store = PostgresRateLimitStorage(client: postgres, table: "trellis_bench_turns")
        try await store.createTable()
        let counting = CountingStore(store: store)
        let limit = RateLimit(requests: 2_000, per: .seconds(1), burst: 20, maximumWait: .seconds(60))
        var shared = limit
        shared.sharing = RateLimitSharing(storage: counting, batch: 10)
        let request = try Trellis.Request(method: .get, url: url.appending(path: "me"))
        func callsPerSecond(_ limit: RateLimit) async throws -> Double {
            // A client per round, so that each starts with a full bucket.
            let client = Client(baseURL: url) { $0.resilience.rateLimit = limit }
            let seconds = try await milliseconds {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<16 {
                        group.addTask { for _ in 0..<(rateLimitCalls / 16) { _ = try await client.data(for: request) } }
                    }
                    try await group.waitForAll()
                }
            } / 1000
            return Double(rateLimitCalls) / seconds
        }
        _ = try await callsPerSecond(limit)  // warm-up: connections, code paths
        let batchesBefore = counting.batches.withLockedValue { $0 }
        let (local, fleet) = try await alternated(rounds, { try await callsPerSecond(limit) }, { try await callsPerSecond(shared) })
        let roundTrips = Double(counting.batches.withLockedValue { $0 } - batchesBefore) / Double(rounds * rateLimitCalls)
        return [Row(
            name: "\(rateLimitCalls) calls under 2,000/s, shared through PostgreSQL", baseline: "the same limit in the process",
            baselineValue: mean(local), value: mean(fleet), unit: "calls/s",
            note: String(format: "mean of rounds' ratios %.3f; %.3f round trips a call", mean(zip(fleet, local).map(/)), roundTrips)
        )]
    }

    private static func accessTokens(_ postgres: PostgresClient, _ url: URL, rounds: Int) async throws -> [Row] {
        let storage = PostgresAccessTokenStorage(client: postgres, table: "trellis_bench_tokens")
        try await storage.createTable()
        let token = AccessToken(accessToken: "good", expiresIn: 3600)
        try await storage.store(token, for: AccessTokenRequirement.defaultLabel)
        var request = try Trellis.Request(method: .get, url: url.appending(path: "me"))
        request.requireAccessToken()
        let inPostgres = Client(baseURL: url) { $0.accessTokens = AccessTokenSettings(storage: storage) }
        let inMemory = Client(baseURL: url) {
            $0.accessTokens = AccessTokenSettings(storage: InMemoryAccessTokenStorage([AccessTokenRequirement.defaultLabel: token]))
        }
        func callsPerSecond(_ client: Client) async throws -> Double {
            let seconds = try await milliseconds { for _ in 0..<tokenCalls { _ = try await client.data(for: request) } } / 1000
            return Double(tokenCalls) / seconds
        }
        _ = try await callsPerSecond(inPostgres)
        _ = try await callsPerSecond(inMemory)
        let statementsBefore = try await statements(postgres)
        let (memory, shared) = try await alternated(rounds, { try await callsPerSecond(inMemory) }, { try await callsPerSecond(inPostgres) })
        // The two readings are statements themselves, one each.
        let roundTrips = Double(try await statements(postgres) - statementsBefore - 1) / Double(rounds * tokenCalls)
        return [Row(
            name: "\(tokenCalls) sequential calls, token in PostgreSQL", baseline: "token in memory",
            baselineValue: mean(memory), value: mean(shared), unit: "calls/s",
            note: String(format: "mean of rounds' ratios %.3f; %.3f round trips a call", mean(zip(shared, memory).map(/)), roundTrips)
        )]
    }

    /// The transactions the database has committed, this session's reading included; the
    /// server's statistics are flushed first so that other sessions' count.
    private static func statements(_ postgres: PostgresClient) async throws -> Int {
        try await postgres.withConnection { connection in
            _ = try await connection.query("SELECT pg_stat_force_next_flush()", logger: Logger(label: "bench"))
            let rows = try await connection.query("SELECT xact_commit::int FROM pg_stat_database WHERE datname = 'postgres'", logger: Logger(label: "bench"))
            for try await count in rows.decode(Int.self) { return count }
            return 0
        }
    }

}
