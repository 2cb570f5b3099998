#if Postgres
import Foundation
import PostgresNIO
import Testing
import Trellis
import TrellisPostgres

/// Access tokens kept in a real PostgreSQL server the test starts, by clients that stand for
/// the processes of a fleet (each with a storage of its own), against an authorization server
/// that rotates refresh tokens and logs the fleet out when one is used twice.
@Suite("Access tokens shared through PostgreSQL", .hangGuard)
struct PostgresAccessTokenTests {
    /// Exchanges the stored refresh token at the rotating server.
    struct Refresher: TokenRefresher {
        let url: URL

        func refreshToken(_ current: AccessToken?, label: String, client: Client) async throws -> any AccessTokenConvertible {
            var request = try Request(method: .post, url: url.appending(path: "oauth/refresh"))
            request.body = RequestBody(#"{"refresh_token":"\#(current?.refreshToken ?? "")"}"#, contentType: "application/json")
            return try JSONDecoder().decode(AccessToken.self, from: try await client.data(for: request).body)
        }
    }

    /// A client of `url` whose tokens are in `storage`.
    static func client(_ url: URL, _ storage: some AccessTokenStorage) -> Client {
        Client(baseURL: url) {
            $0.accessTokens = AccessTokenSettings(storage: storage, refresher: Refresher(url: url), expiryLeeway: .zero)
        }
    }

    /// A call to `/me` that needs the token.
    static func me(_ url: URL) throws -> Request {
        var request = try Request(method: .get, url: url.appending(path: "me"))
        request.requireAccessToken()
        return request
    }

    /// The server's first pair, stored as already expired, so that the next call refreshes.
    static func expiredLogin(_ server: RotatingTokenServer) -> AccessToken {
        let pair = server.login()
        return AccessToken(accessToken: pair.access, refreshToken: pair.refresh, expiresAt: Date(timeIntervalSinceNow: -1))
    }

    /// Three clients, each with its own storage of one table, make 30 calls at once with an
    /// expired token: one refresh for all of them, and no refresh token used twice.
    @Test func clientsOfOneDatabaseRefreshOnce() async throws {
        try await PostgresServer.withDatabase { _, postgres in
            let server = RotatingTokenServer(lifetime: .seconds(60))
            try await TestServer.with(server.install) { url in
                let storages = (0..<3).map { _ in PostgresAccessTokenStorage(client: postgres, timeLimit: .patientStoreLimit) }
                try await storages[0].createTable()
                try await storages[0].store(Self.expiredLogin(server), for: AccessTokenRequirement.defaultLabel)
                let clients = storages.map { Self.client(url, $0) }
                let request = try Self.me(url)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for client in clients {
                        for _ in 0..<10 { group.addTask { _ = try await client.data(for: request) } }
                    }
                    try await group.waitForAll()
                }
                #expect(server.refreshes == 1)
                #expect(server.reuses == 0)
                // Every storage now holds the one new token.
                for storage in storages {
                    #expect(try await storage.fetch(for: AccessTokenRequirement.defaultLabel)?.accessToken == "access-2")
                }
            }
        }
    }

    /// A good token costs no round trip: each process keeps the token it read, so calls go on
    /// with the database stopped, even through a storage that refuses calls when it fails.
    @Test func aGoodTokenCostsNoRoundTrip() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let server = RotatingTokenServer(lifetime: .seconds(60))
            try await TestServer.with(server.install) { url in
                // The login is stored patiently: the short limit is for the stopped database, and
                // a loaded machine took longer than it to store a token.
                let patient = PostgresAccessTokenStorage(client: postgres, timeLimit: .patientStoreLimit)
                try await patient.createTable()
                let pair = server.login()
                try await patient.store(AccessToken(accessToken: pair.access, refreshToken: pair.refresh, expiresIn: 60), for: AccessTokenRequirement.defaultLabel)
                let storage = PostgresAccessTokenStorage(client: postgres, timeLimit: .milliseconds(500))
                let client = Self.client(url, storage)
                let request = try Self.me(url)
                // The first call reads the token through the short limit, until a read is in time.
                var answered = false
                for _ in 0..<50 where !answered {
                    answered = (try? await client.data(for: request)) != nil
                }
                #expect(answered)
                try await database.stop()
                for _ in 0..<20 { _ = try await client.data(for: request) }
                #expect(server.refreshes == 0)
            }
        }
    }

    /// The database stops: a storage that refuses calls fails the refresh within its time limit
    /// and names why, without asking the authorization server; one that goes on alone
    /// refreshes in its process. Once the database is back, the lock is taken again.
    @Test func aStoppedDatabaseIsMetAsTheStorageSays() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let server = RotatingTokenServer(lifetime: .seconds(60))
            try await TestServer.with(server.install) { url in
                let refusing = PostgresAccessTokenStorage(client: postgres, timeLimit: .milliseconds(500))
                let alone = PostgresAccessTokenStorage(client: postgres, timeLimit: .milliseconds(500), whenStorageFails: .continueInProcess)
                // Stored patiently, and read until a read is in time: the short limits are for
                // the stopped database, and a loaded machine took longer than them.
                let patient = PostgresAccessTokenStorage(client: postgres, timeLimit: .patientStoreLimit)
                try await patient.createTable()
                try await patient.store(Self.expiredLogin(server), for: AccessTokenRequirement.defaultLabel)
                // Each storage keeps what it read, as it keeps what it stored.
                for storage in [refusing, alone] {
                    var read = false
                    for _ in 0..<50 where !read {
                        read = (try? await storage.fetch(for: AccessTokenRequirement.defaultLabel)) != nil
                    }
                    #expect(read)
                }
                let request = try Self.me(url)

                try await database.stop()
                // A failure of the call, as every other: the storage's error is underneath.
                let error = await #expect(throws: TrellisError.self) {
                    try await Self.client(url, refusing).data(for: request)
                }
                guard case .authenticationRequired(let failure) = error, let storage = failure.underlying as? AccessTokenStorageError else {
                    Issue.record("expected authenticationRequired over the storage's error, got \(String(describing: error))")
                    return
                }
                #expect(storage.reason.contains("is not refreshed without it"))
                #expect(server.refreshes == 0)
                _ = try await Self.client(url, alone).data(for: request)
                #expect(server.refreshes == 1)

                try await database.start()
                // A new login, stored expired: the refusing storage refreshes it under the lock
                // once the pool has reconnected. The pool reconnects on its own, and on a loaded
                // machine an operation may still run out of its limit: the login is stored
                // first, until it is (a refresh with the table's older token would spend a
                // refresh token the process alone already spent), then the call is made until
                // it takes the lock.
                let login = Self.expiredLogin(server)
                var stored = false
                for _ in 0..<50 where !stored {
                    stored = (try? await refusing.store(login, for: AccessTokenRequirement.defaultLabel)) != nil
                }
                #expect(stored)
                var answered = false
                for _ in 0..<50 where !answered {
                    answered = (try? await Self.client(url, refusing).data(for: request)) != nil
                }
                #expect(answered)
                #expect(server.refreshes == 2)
                #expect(server.reuses == 0)
            }
        }
    }
}
#endif
