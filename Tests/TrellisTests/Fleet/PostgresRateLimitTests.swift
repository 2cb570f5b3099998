#if Postgres
import Foundation
import Logging
import PostgresNIO
import Testing
@testable import Trellis
import TrellisPostgres
import TrellisTesting

/// The rate limit shared through a real PostgreSQL server the test starts, by clients that
/// stand for the processes of a fleet, against a real HTTP server.
@Suite("A rate limit shared through PostgreSQL", .hangGuard)
struct PostgresRateLimitTests {
    /// Runs `body` with a fresh server and a store whose table exists.
    static func withStore(_ body: (PostgresServer, PostgresRateLimitStorage) async throws -> Void) async throws {
        try await PostgresServer.withDatabase { server, postgres in
            let store = PostgresRateLimitStorage(client: postgres)
            try await store.createTable()
            try await body(server, store)
        }
    }

    /// Two clients share 50 requests a second, 5 turns a batch: in no second does the HTTP
    /// server see more than the quota plus a batch per client.
    @Test func twoClientsKeepWithinOneQuota() async throws {
        try await Self.withStore { _, store in
            try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
                let clients = (0..<2).map { _ in
                    Client(baseURL: server.url) {
                        $0.resilience.rateLimit = RateLimit(requests: 50, per: .seconds(1), sharing: RateLimitSharing(storage: store, batch: 5, timeLimit: .patientStoreLimit))
                    }
                }
                let request = try Request(method: .get, url: server.url)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for client in clients {
                        group.addTask { for _ in 0..<40 { _ = try await client.data(for: request) } }
                    }
                    try await group.waitForAll()
                }
                let arrivals = server.requests.map(\.arrived)
                #expect(arrivals.count == 80)
                let mostInASecond = arrivals.map { start in arrivals.filter { $0 >= start && $0 < start + .seconds(1) }.count }.max() ?? 0
                #expect(mostInASecond <= 50 + 2 * 5)
                // Eighty turns at 20 ms from one schedule take 1.6 s at least.
                #expect(arrivals.max()! - arrivals.min()! >= .milliseconds(1500))
            }
        }
    }

    /// The database stops: a client set to refuse calls refuses them within the time limit; one
    /// set to go on alone goes on; once the database is back, both use it again.
    @Test func aStoppedDatabaseIsMetAsEachClientSaysAndUsedAgainWhenItIsBack() async throws {
        try await Self.withStore { postgres, store in
            try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
                let events = RecordedResilienceEvents()
                let client = { (failure: SharedStateFailure, limit: Duration) in
                    Client(baseURL: server.url) {
                        let sharing = RateLimitSharing(storage: store, batch: 1, timeLimit: limit, whenStorageFails: failure, retryStorageAfter: .zero)
                        $0.resilience.rateLimit = RateLimit(requests: 100, per: .seconds(1), sharing: sharing)
                        if failure == .continueInProcess { $0.observability.eventMonitors = [events] }
                    }
                }
                // A short limit for the stopped database; while it runs, the clients are patient:
                // a loaded machine took longer than 2 s to answer a running one.
                let refusing = client(.refuseCalls, .patientStoreLimit)
                let alone = client(.continueInProcess, .patientStoreLimit)
                let request = try Request(method: .get, url: server.url)
                _ = try await refusing.data(for: request)
                _ = try await alone.data(for: request)
                // The two clients share one quota, so a call may also wait its turn: only the
                // store's failures are counted.
                let failures = { events.names.filter { $0 == "shared_state_failed" }.count }
                #expect(failures() == 0)

                try await postgres.stop()
                let refusal = try await refusalOf(client(.refuseCalls, .seconds(2)), request)
                #expect(refusal.reason == .rateLimit)
                _ = try await client(.continueInProcess, .seconds(2)).data(for: request)
                #expect(failures() == 1)

                try await postgres.start()
                // The pool reconnects on its own; a call may meet it still reconnecting.
                var answered = false
                for _ in 0..<50 where !answered {
                    answered = (try? await refusing.data(for: request)) != nil
                }
                #expect(answered)
                _ = try await alone.data(for: request)
                #expect(failures() == 1)
            }
        }
    }
}
#endif
