import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import Trellis

struct Credentials: Codable, Sendable {
    var user: String
    var password: String
}

struct RefreshGrant: Codable, Sendable {
    var refreshToken: String
}

/// A token response in the server's own shape, as most APIs have.
struct OAuthToken: AccessTokenConvertible, Sendable {
    var access_token: String
    var refresh_token: String
    var expires_in: Double

    func convert() -> AccessToken? {
        AccessToken(accessToken: access_token, refreshToken: refresh_token, expiresIn: expires_in)
    }
}

struct User: Codable, Equatable, Sendable {
    var name: String
    /// The access token the server accepted, so a test can tell which one was used.
    var token: String
}

@Service
@TokenLabel("blog")
protocol SecureBlog {
    @POST("/oauth/token") @Body("credentials")
    func login(credentials: Credentials) async throws -> OAuthToken

    @POST("/oauth/refresh") @Body("grant")
    func refresh(grant: RefreshGrant) async throws -> OAuthToken

    @GET("/me") @RequiresAccessToken
    func me() async throws -> User

    @PUT("/me/notes") @RequiresAccessToken @Body("note")
    func saveNote(note: String) async throws -> User

    @GET("/away") @RequiresAccessToken
    func away(to: String) async throws -> Echo

    @POST("/orders") @RequiresAccessToken @IdempotencyKey
    func placeOrder() async throws -> User
}

@Service
@TokenLabel("shop")
protocol SecureShop {
    @GET("/me") @RequiresAccessToken
    func me() async throws -> User
}

@Service
protocol DefaultLabel {
    @GET("/me") @RequiresAccessToken
    func me() async throws -> User
}

/// The server side of ``SecureBlog``: issues rotating tokens, accepts only the current ones
/// and counts what it saw.
final class AuthServer: Sendable {
    enum RefreshMode: Sendable {
        /// Issue a new token pair.
        case issue
        /// Refuse with 401 (the refresh token was revoked).
        case refuse
    }

    struct State {
        var validTokens: Set<String> = []
        var refreshTokens: Set<String> = []
        var issued = 0
        var refreshCalls = 0
        var rejected = 0
        var meRequests = 0
        var refreshMode = RefreshMode.issue
        var rejectEverything = false
        var expiresIn: Double = 3600
        var presentedTokens: [String] = []
        /// The `Idempotency-Key` of each `POST /orders`, refused or not.
        var orderKeys: [String] = []
    }

    let state = NIOLockedValueBox(State())

    var refreshCalls: Int { state.withLockedValue { $0.refreshCalls } }
    var rejected: Int { state.withLockedValue { $0.rejected } }
    var meRequests: Int { state.withLockedValue { $0.meRequests } }

    /// Makes every access token issued so far invalid, as their expiry on the server would.
    func expireAccessTokens() {
        state.withLockedValue { $0.validTokens = [] }
    }

    private func issue(_ state: inout State) -> OAuthToken {
        state.issued += 1
        let token = OAuthToken(access_token: "access-\(state.issued)", refresh_token: "refresh-\(state.issued)", expires_in: state.expiresIn)
        state.validTokens.insert(token.access_token)
        state.refreshTokens.insert(token.refresh_token)
        return token
    }

    private func unauthorized() -> Response {
        Response(
            status: .unauthorized,
            headers: [.wwwAuthenticate: "Bearer error=\"invalid_token\"", .contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_token"}"#))
        )
    }

    /// The user the request's bearer token belongs to, or `nil` when it is not accepted.
    private func authenticate(_ request: Request) -> String? {
        let header = request.headers[.authorization] ?? ""
        return state.withLockedValue { state -> String? in
            guard header.hasPrefix("Bearer ") else {
                state.rejected += 1
                return nil
            }
            let token = String(header.dropFirst("Bearer ".count))
            state.presentedTokens.append(token)
            guard !state.rejectEverything, state.validTokens.contains(token) else {
                state.rejected += 1
                return nil
            }
            return token
        }
    }

    func install(_ router: Router<BasicRequestContext>) {
        TestRoutes.install(router)
        router.post("oauth/token") { request, context in
            let credentials = try await request.decode(as: Credentials.self, context: context)
            guard credentials.password == "secret" else { return self.unauthorized() }
            return try TestRoutes.json(self.state.withLockedValue { self.issue(&$0) })
        }
        router.post("oauth/refresh") { request, context in
            let grant = try await request.decode(as: RefreshGrant.self, context: context)
            let token = self.state.withLockedValue { state -> OAuthToken? in
                state.refreshCalls += 1
                guard state.refreshMode == .issue, state.refreshTokens.remove(grant.refreshToken) != nil else { return nil }
                return self.issue(&state)
            }
            guard let token else { return self.unauthorized() }
            return try TestRoutes.json(token)
        }
        router.get("me") { request, _ in
            self.state.withLockedValue { $0.meRequests += 1 }
            guard let token = self.authenticate(request) else { return self.unauthorized() }
            return try TestRoutes.json(User(name: "ada", token: token))
        }
        router.put("me/notes") { request, _ in
            guard let token = self.authenticate(request) else { return self.unauthorized() }
            var request = request
            let note = try await request.collectBody(upTo: 1 << 20)
            return try TestRoutes.json(User(name: String(buffer: note), token: token))
        }
        router.post("orders") { request, _ in
            self.state.withLockedValue { $0.orderKeys.append(request.headers[HTTPField.Name("Idempotency-Key")!] ?? "none") }
            guard let token = self.authenticate(request) else { return self.unauthorized() }
            return try TestRoutes.json(User(name: "order", token: token))
        }
        router.get("away") { request, _ in
            guard self.authenticate(request) != nil else { return self.unauthorized() }
            let target = request.uri.queryParameters.get("to") ?? "/"
            return Response(status: .found, headers: [.location: target])
        }
    }
}

extension SecureBlogService {
    /// The refresh hook the tests use: exchange the stored refresh token.
    static let refreshHook: @Sendable (SecureBlogService) async throws -> any AccessTokenConvertible = { blog in
        guard let refreshToken = try await blog.accessToken()?.refreshToken else {
            throw TrellisError.authenticationRequired(.init(label: blog.tokenLabel, reason: "log in first"))
        }
        return try await blog.refresh(grant: RefreshGrant(refreshToken: refreshToken))
    }
}
