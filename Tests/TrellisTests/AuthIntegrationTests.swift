import Foundation
import HTTPTypes
import Logging
import NIOCore
import Testing
import Trellis

@Suite("Access tokens: storage, injection, single-flight refresh")
struct AuthIntegrationTests {
    private func withBlog(
        _ kind: TransportKind,
        settings: AccessTokenSettings = AccessTokenSettings(),
        logger: Logger = Logger(label: "trellis-test"),
        configure: @escaping (inout Client.Configuration) -> Void = { _ in },
        _ body: (SecureBlogService, AuthServer, URL) async throws -> Void
    ) async throws {
        let server = AuthServer()
        try await TestServer.with(server.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) {
                $0.logger = logger
                $0.accessTokens = settings
                // 200 calls at once ran past the default minute under ThreadSanitizer beside a build.
                $0.timeouts = .patient
                configure(&$0)
            }
            let blog = SecureBlogService(client: client)
            blog.onAuthRetry = SecureBlogService.refreshHook
            try await body(blog, server, url)
        }
    }

    private func authenticationFailure(_ error: (any Error)?) -> AuthenticationFailure? {
        if case .authenticationRequired(let failure) = error as? TrellisError { return failure }
        Issue.record("expected authenticationRequired, got \(String(describing: error))")
        return nil
    }

    @Test(arguments: TransportKind.allCases)
    func loginStoresTheReturnedTokenAndProtectedCallsSendIt(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, _, _ in
            #expect(blog.onAuthRetry != nil)
            let token = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            let stored = try await blog.accessToken()
            #expect(stored?.accessToken == token.access_token)
            #expect(stored?.refreshToken == token.refresh_token)
            #expect(stored?.tokenType == "Bearer")
            let user = try await blog.me()
            #expect(user.token == token.access_token)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func concurrentCallsWithARefusedTokenShareOneRefresh(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, server, _ in
            let first = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            server.expireAccessTokens()
            let users = try await withThrowingTaskGroup(of: User.self) { group in
                for _ in 0..<200 { group.addTask { try await blog.me() } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(users.count == 200)
            #expect(server.refreshCalls == 1)
            let stored = try #require(try await blog.accessToken())
            #expect(stored.accessToken != first.access_token)
            #expect(users.allSatisfy { $0.token == stored.accessToken })
        }
    }

    /// A keyed call refused for its token is replayed after the refresh with the same key: one
    /// operation, whichever of its arrivals the server carries out.
    @Test(arguments: TransportKind.allCases)
    func theReplayAfterARefreshCarriesTheCallsIdempotencyKey(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, server, _ in
            _ = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            server.expireAccessTokens()
            _ = try await blog.placeOrder()
            let keys = server.state.withLockedValue { $0.orderKeys }
            #expect(keys.count == 2 && Set(keys).count == 1 && keys[0] != "none", "refused, then replayed, under one key: \(keys)")
            #expect(server.refreshCalls == 1)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aTokenKnownToBeExpiredIsRefreshedBeforeSending(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, server, _ in
            let login = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            // Valid on the server, but past its expiry as far as the client knows.
            try await blog.setAccessToken(
                AccessToken(accessToken: login.access_token, refreshToken: login.refresh_token, expiresAt: Date().addingTimeInterval(-5))
            )
            let users = try await withThrowingTaskGroup(of: User.self) { group in
                for _ in 0..<20 { group.addTask { try await blog.me() } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(server.refreshCalls == 1)
            #expect(server.rejected == 0)
            #expect(users.allSatisfy { $0.token != login.access_token })
            #expect(!server.state.withLockedValue { $0.presentedTokens }.contains(login.access_token))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func theExpiryLeewayRefreshesATokenAboutToExpire(_ kind: TransportKind) async throws {
        try await withBlog(kind, settings: AccessTokenSettings(expiryLeeway: .seconds(120))) { blog, server, _ in
            server.state.withLockedValue { $0.expiresIn = 60 }
            let login = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            server.state.withLockedValue { $0.expiresIn = 3600 }
            let user = try await blog.me()
            #expect(server.refreshCalls == 1)
            #expect(user.token != login.access_token)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRefusedRefreshDeletesTheTokenAndFailsEveryWaiter(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, server, _ in
            _ = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            server.expireAccessTokens()
            server.state.withLockedValue { $0.refreshMode = .refuse }
            let outcomes = await withTaskGroup(of: (any Error)?.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        do {
                            _ = try await blog.me()
                            return nil
                        } catch { return error }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.count == 20)
            for error in outcomes {
                #expect(authenticationFailure(error)?.label == "blog")
            }
            #expect(server.refreshCalls == 1)
            #expect(try await blog.accessToken() == nil)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aNetworkFailureDuringRefreshKeepsTheToken(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, server, _ in
            let login = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            server.expireAccessTokens()
            // The token endpoint is unreachable: a connection refused by a port nobody listens on.
            let refusing = try RefusingPort()
            let deadURL = refusing.url
            defer { withExtendedLifetime(refusing) {} }
            let unreachable = SecureBlogService(client: Client(baseURL: deadURL, transport: kind.transport))
            blog.onAuthRetry = { _ in try await unreachable.refresh(grant: RefreshGrant(refreshToken: login.refresh_token)) }
            let error = await #expect(throws: TrellisError.self) { try await blog.me() }
            guard case .connectionFailed = error else {
                Issue.record("expected connectionFailed, got \(String(describing: error))")
                return
            }
            #expect(try await blog.accessToken()?.accessToken == login.access_token)
        }
    }

    /// With retries on too, the token stage's replay and the retry policy do not send again
    /// for each other: a `401` after a refresh is the call's answer, not a failure to retry.
    @Test(arguments: TransportKind.allCases, [0, 3])
    func aReplayedRequestRefusedAgainFailsWithoutLooping(_ kind: TransportKind, retries: Int) async throws {
        try await withBlog(kind, configure: { $0.retryWithoutWaiting(RetryPolicy(maximumRetries: retries)) }) { blog, server, _ in
            _ = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            server.state.withLockedValue { $0.rejectEverything = true }
            let error = await #expect(throws: TrellisError.self) { try await blog.me() }
            guard case .unacceptableStatus(let failure) = error else {
                Issue.record("expected unacceptableStatus, got \(String(describing: error))")
                return
            }
            #expect(failure.status == .unauthorized)
            #expect(server.refreshCalls == 1)
            #expect(server.meRequests == 2)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func withoutATokenOrAHookNothingIsSent(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, server, _ in
            blog.onAuthRetry = nil
            let error = await #expect(throws: TrellisError.self) { try await blog.me() }
            #expect(authenticationFailure(error)?.label == "blog")
            #expect(server.meRequests == 0)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func labelsKeepTheTokensOfServicesApart(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, _, _ in
            let shop = SecureShopService(client: blog.client)
            let other = DefaultLabelService(client: blog.client)
            #expect(SecureBlogService.tokenLabel == "blog")
            #expect(SecureShopService.tokenLabel == "shop")
            #expect(DefaultLabelService.tokenLabel == "TrellisToken")
            _ = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            _ = try await blog.me()
            let error = await #expect(throws: TrellisError.self) { try await shop.me() }
            #expect(authenticationFailure(error)?.label == "shop")
            #expect(try await other.accessToken() == nil)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRedirectToAnotherOriginCarriesNoAuthorization(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, _, url in
            _ = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            let sameOrigin = try await blog.away(to: url.absoluteString + "/echo/same")
            #expect(sameOrigin.path == "/echo/same")
            #expect(sameOrigin.header("authorization")?.hasPrefix("Bearer access-") == true)
            try await TestServer.with(TestRoutes.install) { otherURL in
                let crossOrigin = try await blog.away(to: otherURL.absoluteString + "/echo/other")
                #expect(crossOrigin.path == "/echo/other")
                #expect(crossOrigin.header("authorization") == nil)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRequestToAnotherOriginNeverGetsTheToken(_ kind: TransportKind) async throws {
        try await withBlog(kind) { blog, _, _ in
            _ = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            try await TestServer.with(TestRoutes.install) { otherURL in
                var request = try Request(method: .get, url: otherURL.appending(path: "echo/elsewhere"))
                request.requireAccessToken(label: "blog")
                let echo = try await blog.client.value(for: request, as: Echo.self)
                #expect(echo.header("authorization") == nil)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func replayableBodiesAreReplayedAndOneShotStreamsFailClearly(_ kind: TransportKind) async throws {
        struct Refresher: TokenRefresher {
            func refreshToken(_ current: AccessToken?, label: String, client: Client) async throws -> any AccessTokenConvertible {
                let blog = SecureBlogService(client: client)
                return try await blog.refresh(grant: RefreshGrant(refreshToken: current?.refreshToken ?? ""))
            }
        }
        try await withBlog(kind, settings: AccessTokenSettings(refresher: Refresher())) { blog, server, url in
            blog.onAuthRetry = nil
            _ = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            server.expireAccessTokens()
            let saved = try await blog.saveNote(note: "kept across the replay")
            #expect(saved.name == "kept across the replay")
            #expect(server.refreshCalls == 1)

            server.expireAccessTokens()
            let chunks = AsyncStream<ByteBuffer> { continuation in
                continuation.yield(ByteBuffer(string: "one-shot"))
                continuation.finish()
            }
            var request = try Request(method: .put, url: url.appending(path: "me/notes"), body: RequestBody(stream: chunks))
            request.requireAccessToken(label: "blog")
            let error = await #expect(throws: TrellisError.self) { try await blog.client.value(for: request, as: User.self) }
            guard case .invalidRequest(let invalid) = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                return
            }
            #expect(invalid.part == .body)
            #expect(invalid.reason.contains("one-shot"))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func tokensNeverReachTheLog(_ kind: TransportKind) async throws {
        let records = LogCapture()
        var logger = Logger(label: "trellis-test") { _ in records }
        logger.logLevel = .debug
        try await withBlog(kind, logger: logger) { blog, server, _ in
            _ = try await blog.login(credentials: Credentials(user: "ada", password: "secret"))
            server.expireAccessTokens()
            _ = try await blog.me()
        }
        let text = records.messages.joined(separator: "\n")
        #expect(text.contains("GET"))
        #expect(!text.contains("Bearer access-"))
    }
}

@Suite("Access token storage")
struct AccessTokenStorageTests {
    private func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory
            .appending(path: "trellis-tokens-\(UUID().uuidString)")
            .appending(path: "tokens.json")
    }

    @Test
    func theFileStoreSurvivesANewInstanceAndIsPrivate() async throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        let expiry = Date(timeIntervalSince1970: 2_000_000_000)
        let token = AccessToken(accessToken: "a", refreshToken: "r", tokenType: "Bearer", expiresAt: expiry)
        try await FileAccessTokenStorage(fileURL: file).store(token, for: "blog")
        try await FileAccessTokenStorage(fileURL: file).store(AccessToken(accessToken: "s"), for: "shop")

        // A fresh instance has nothing in memory: it reads what the first one wrote, as a new
        // process would.
        let reopened = FileAccessTokenStorage(fileURL: file)
        #expect(try await reopened.fetch(for: "blog") == token)
        #expect(try await reopened.fetch(for: "shop")?.accessToken == "s")
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path)
        #expect(leftovers == ["tokens.json"])

        try await reopened.delete(for: "blog")
        #expect(try await FileAccessTokenStorage(fileURL: file).fetch(for: "blog") == nil)
        #expect(try await FileAccessTokenStorage(fileURL: file).fetch(for: "shop") != nil)
    }

    @Test
    func aCorruptFileIsReportedWithItsPath() async throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("not json".utf8).write(to: file)
        let error = await #expect(throws: AccessTokenStorageError.self) {
            try await FileAccessTokenStorage(fileURL: file).fetch(for: "blog")
        }
        #expect(error?.location == file.path)
    }

    @Test
    func tokensDecodeFromOAuthResponsesAndTrellisFiles() throws {
        let oauth = try JSONDecoder().decode(
            AccessToken.self,
            from: Data(#"{"access_token":"a","refresh_token":"r","token_type":"bearer","expires_in":60}"#.utf8)
        )
        #expect(oauth.accessToken == "a")
        #expect(oauth.refreshToken == "r")
        #expect(oauth.authorizationValue == "Bearer a")
        #expect(!oauth.isExpired())
        #expect(oauth.isExpired(leeway: .seconds(120)))
        let roundTrip = try JSONDecoder().decode(AccessToken.self, from: JSONEncoder().encode(oauth))
        #expect(roundTrip == oauth)
        #expect(AccessToken(accessToken: "m", tokenType: "MAC").authorizationValue == "MAC m")
    }
}

@Suite("Basic authentication and API keys")
struct StaticCredentialTests {
    @Test(arguments: TransportKind.allCases)
    func basicCredentialsAndKeysAreSentToTheirOriginOnly(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(
                baseURL: url,
                transport: kind.transport,
                middlewares: [
                    BasicAuthentication(username: "ada", password: "lovelace", origin: url),
                    try APIKey(.header("X-API-Key"), "k3y", origin: url),
                    try APIKey(.query("api_key"), "q k3y", origin: url),
                ]
            )
            let echo = try await client.value(for: Request(method: .get, url: url.appending(path: "echo/basic")), as: Echo.self)
            #expect(echo.header("authorization") == "Basic " + Data("ada:lovelace".utf8).base64EncodedString())
            #expect(echo.header("x-api-key") == "k3y")
            #expect(echo.values(of: "api_key") == ["q k3y"])
            try await TestServer.with(TestRoutes.install) { otherURL in
                let elsewhere = try await client.value(for: Request(method: .get, url: otherURL.appending(path: "echo/x")), as: Echo.self)
                #expect(elsewhere.header("authorization") == nil)
                #expect(elsewhere.header("x-api-key") == nil)
                #expect(elsewhere.query.isEmpty)
            }
        }
    }

    @Test
    func anAPIKeyWithALineBreakIsRefused() {
        #expect(throws: TrellisError.self) { try APIKey(.header("X-API-Key"), "a\r\nb") }
        #expect(throws: TrellisError.self) { try APIKey(.header("bad name"), "a") }
    }
}
