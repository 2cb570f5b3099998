#if Postgres
import Foundation
import NIOConcurrencyHelpers
import Testing
import Trellis
import TrellisPostgres

/// Storages of a database that lets the client in and then stops answering, before the
/// transaction begins or once it has: each step is held to its limit, and no caller waits on
/// a statement that is never answered (postgres-nio 1.33.2 never answers one written to a
/// connection that has just closed, nor hears of its caller's cancellation).
@Suite("A database that stops answering", .hangGuard)
struct PostgresSilentDatabaseTests {
    /// Each step's time limit. On a loaded machine the steps before the silent one may run out
    /// first: under ThreadSanitizer beside busy loops, with every test starting at once, the
    /// connection step (letting the client in and answering its `BEGIN`) ran out of 10 s. So
    /// when the lock is the silent step, the step named may be the connection; either way the
    /// refresh ends, refused, and is never made.
    static let stepLimit = Duration.seconds(2)

    /// Statements answered before the silence, and the steps the storage may name.
    static let silences: [(answered: Int, steps: [String])] = [
        (0, ["no connection within"]),
        (1, ["no lock on TrellisToken within", "no connection within"]),
    ]

    @Test(arguments: silences)
    func aRefreshIsRefusedAtTheLimitOfTheStepThatGoesUnanswered(answered: Int, steps: [String]) async throws {
        try await SilentPostgresServer.with(answered: answered) { postgres in
            let storage = PostgresAccessTokenStorage(client: postgres, timeLimit: Self.stepLimit, lockWait: .milliseconds(100))
            let refreshes = NIOLockedValueBox(0)
            let error = await #expect(throws: AccessTokenStorageError.self) {
                try await storage.refreshOnce("TrellisToken") { _ in
                    refreshes.withLockedValue { $0 += 1 }
                    return AccessToken(accessToken: "a", refreshToken: "r", expiresIn: 60)
                }
            }
            #expect(steps.contains { error?.reason.contains($0) == true }, "\(String(describing: error))")
            #expect(refreshes.withLockedValue { $0 } == 0)
        }
    }

    /// After the database failed a refresh, a storage with `retryStorageAfter` leaves it alone
    /// that long: the next refresh is refused at once, naming the window, instead of waiting out
    /// the time limit on the database again.
    @Test func aStorageThatFailedIsLeftAloneForRetryStorageAfter() async throws {
        try await SilentPostgresServer.with(answered: 0) { postgres in
            let storage = PostgresAccessTokenStorage(
                client: postgres, timeLimit: Self.stepLimit, lockWait: .milliseconds(100), retryStorageAfter: .seconds(3600)
            )
            let refreshes = NIOLockedValueBox(0)
            let refresh: @Sendable (AccessToken?) async throws -> AccessToken = { _ in
                refreshes.withLockedValue { $0 += 1 }
                return AccessToken(accessToken: "a", refreshToken: "r", expiresIn: 60)
            }
            let first = await #expect(throws: AccessTokenStorageError.self) { try await storage.refreshOnce("TrellisToken", refresh) }
            #expect(first?.reason.contains("left alone") == false, "\(String(describing: first))")
            let second = await #expect(throws: AccessTokenStorageError.self) { try await storage.refreshOnce("TrellisToken", refresh) }
            #expect(second?.reason.contains("is left alone for retryStorageAfter: 3600.0 seconds") == true, "\(String(describing: second))")
            #expect(refreshes.withLockedValue { $0 } == 0)
        }
    }

    @Test(arguments: silences.map(\.answered))
    func aMissThatCannotTakeTheLockFetchesAlone(answered: Int) async throws {
        try await SilentPostgresServer.with(answered: answered) { postgres in
            let storage = PostgresHTTPCacheStorage(client: postgres, timeLimit: Self.stepLimit, lockWait: .milliseconds(100))
            let fetched = try await storage.fetchingOnce("https://example.com/page") { "fetched" }
            #expect(fetched == "fetched")
        }
    }
}
#endif
