// The access-token part of the tour: log in, let the token expire, and watch one refresh
// serve several concurrent calls.
import Foundation
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

/// The server's token response, in its own shape.
struct OAuthToken: AccessTokenConvertible, Sendable {
    var access_token: String
    var refresh_token: String
    var expires_in: Double

    func convert() -> AccessToken? {
        AccessToken(accessToken: access_token, refreshToken: refresh_token, expiresIn: expires_in)
    }
}

struct Profile: Codable, Sendable {
    var user: String
    var token: String
}

@Service
@TokenLabel("demo")
protocol Account {
    @POST("/oauth/token") @Body("credentials")
    func login(credentials: Credentials) async throws -> OAuthToken

    @POST("/oauth/refresh") @Body("grant")
    func refresh(grant: RefreshGrant) async throws -> OAuthToken

    @GET("/me") @RequiresAccessToken
    func me() async throws -> Profile
}

/// Issues tokens that live two seconds, and counts refreshes.
final class TokenIssuer: Sendable {
    private struct State {
        var issued = 0
        var refreshes = 0
        var expiries: [String: Date] = [:]
    }

    private let state = NIOLockedValueBox(State())
    static let lifetime: Double = 2

    var refreshes: Int { state.withLockedValue { $0.refreshes } }

    private func issue(refreshing: Bool) -> OAuthToken {
        state.withLockedValue { state in
            state.issued += 1
            if refreshing { state.refreshes += 1 }
            let token = OAuthToken(access_token: "token-\(state.issued)", refresh_token: "refresh-\(state.issued)", expires_in: Self.lifetime)
            state.expiries[token.access_token] = Date().addingTimeInterval(Self.lifetime)
            return token
        }
    }

    func install(_ router: Router<BasicRequestContext>) {
        router.post("oauth/token") { request, context in
            let credentials = try await request.decode(as: Credentials.self, context: context)
            guard credentials.password == "demo" else { return Hummingbird.Response(status: .unauthorized) }
            return try json(self.issue(refreshing: false))
        }
        router.post("oauth/refresh") { _, _ in
            try json(self.issue(refreshing: true))
        }
        router.get("me") { request, _ in
            let token = (request.headers[.authorization] ?? "").replacingOccurrences(of: "Bearer ", with: "")
            let expiry = self.state.withLockedValue { $0.expiries[token] }
            guard let expiry, expiry > Date() else {
                return Hummingbird.Response(status: .unauthorized, headers: [.wwwAuthenticate: "Bearer error=\"invalid_token\""])
            }
            return try json(Profile(user: "ada", token: token))
        }
    }
}

func authorizationTour(_ baseURL: URL, issuer: TokenIssuer) async throws {
    // A leeway shorter than the demo tokens' two-second life, so the first token gets used.
    let client = Client(baseURL: baseURL) { $0.accessTokens = AccessTokenSettings(expiryLeeway: .milliseconds(200)) }
    let account = AccountService(client: client)
    account.onAuthRetry = { account in
        guard let refreshToken = try await account.accessToken()?.refreshToken else {
            throw TrellisError.authenticationRequired(.init(label: account.tokenLabel, reason: "log in first"))
        }
        print("  (refreshing the token, once for everyone waiting)")
        return try await account.refresh(grant: RefreshGrant(refreshToken: refreshToken))
    }

    step("Log in: an endpoint returning an AccessTokenConvertible stores the token")
    _ = try await account.login(credentials: Credentials(user: "ada", password: "demo"))
    print("  stored under \"\(account.tokenLabel)\": \(try await account.accessToken()?.accessToken ?? "nothing")")
    print("  /me with it: \(try await account.me().token)")

    step("Wait for the token to expire, then make five calls at once")
    try await Task.sleep(for: .seconds(TokenIssuer.lifetime))
    let tokens = try await withThrowingTaskGroup(of: String.self) { group in
        for _ in 0..<5 { group.addTask { try await account.me().token } }
        return try await group.reduce(into: []) { $0.append($1) }
    }
    print("  the five calls used: \(Set(tokens).sorted().joined(separator: ", "))")
    print("  refreshes the server saw: \(issuer.refreshes)")
}
