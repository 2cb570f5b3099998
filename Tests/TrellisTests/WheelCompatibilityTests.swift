import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
import Trellis

struct WheelUser: Decodable {
    let id: Int
    let title: String
    // other properties...
}

/// wheel's `YourRequestConfig`, with the test server's URL (wheel's names a constant).
enum YourRequestConfig: ConfigRequestConvertible {
    case useCaseOne(URL)
    case useCaseTwo(URL)

    var baseURL: URL {
        switch self {
        case .useCaseOne(let url), .useCaseTwo(let url): url
        }
    }

    var path: String {
        switch self {
        case .useCaseOne:
            return "posts/1"
        case .useCaseTwo:
            return "echo/form"
        }
    }

    var method: HTTPRequest.Method {    // wheel: `HTTPMethod`, `.GET` and `.POST`
        switch self {
        case .useCaseOne:
            return .get
        case .useCaseTwo:
            return .post
        }
    }

    var parameters: [String: Any] {
        switch self {
        case .useCaseOne: return [:]
        case .useCaseTwo: return ["name": "Ada"]  // your urlParams or request body
        }
    }

    var headers: [String: String]? {
        return ["X-Endpoint": "wheel"]  // your endpoint specific headers
    }
}

/// Refreshes by handing out a new token, counting how often.
final class CountingRefresher: TokenRefresher {
    let refreshes = NIOLockedValueBox(0)

    func refreshToken(_ current: AccessToken?, label: String, client: Client) async throws -> any AccessTokenConvertible {
        refreshes.withLockedValue { $0 += 1 }
        return AccessToken(accessToken: "fresh-\(refreshes.withLockedValue { $0 })")
    }
}

/// What wheel's README shows, in Trellis's spelling (the migration tables give the mapping).
@Suite("wheel's examples")
struct WheelCompatibilityTests {
    /// wheel: `httpService.request(authenticated:requestConfig:)`, decoded and `Void`.
    @Test(arguments: TransportKind.allCases)
    func configuredRequestsAreSentAuthenticatedOrNot(_ kind: TransportKind) async throws {
        try await TestServer.with({ TestRoutes.install($0) }) { url in
            let refresher = CountingRefresher()
            let client = Client(baseURL: url, transport: kind.transport) {
                $0.accessTokens.refresher = refresher
                $0.defaultHeaders = [HTTPField.Name("Custom-Header")!: "CustomValue"]
            }
            // No token is stored: the first authenticated request obtains one.
            let user: WheelUser = try await client.request(authenticated: true, requestConfig: YourRequestConfig.useCaseOne(url))
            #expect(user.id == 1)
            #expect(refresher.refreshes.withLockedValue { $0 } == 1)

            let echo: Echo = try await client.request(authenticated: false, requestConfig: YourRequestConfig.useCaseTwo(url))
            #expect(echo.method == "POST")
            #expect(echo.body == "name=Ada")
            #expect(echo.header("X-Endpoint") == "wheel")
            #expect(echo.header("Authorization") == nil)

            let authenticated: Echo = try await client.request(authenticated: true, requestConfig: YourRequestConfig.useCaseTwo(url))
            #expect(authenticated.header("Authorization") == "Bearer fresh-1")

            try await client.request(authenticated: false, requestConfig: YourRequestConfig.useCaseTwo(url))
        }
    }

    /// wheel: `let commonHeaders = ["Custom-Header": "CustomValue"]`, appended to every request.
    @Test(arguments: TransportKind.allCases)
    func commonHeadersGoOnEveryRequestAndARequestsOwnValueWins(_ kind: TransportKind) async throws {
        try await TestServer.with({ TestRoutes.install($0) }) { url in
            let commonHeaders: HTTPFields = [HTTPField.Name("Custom-Header")!: "CustomValue", .accept: "application/vnd.wheel+json"]
            let client = Client(baseURL: url, transport: kind.transport) { $0.defaultHeaders = commonHeaders }
            let probe = ProbeService(client: client)

            let plain = try await probe.segment(value: "a")
            #expect(plain.header("Custom-Header") == "CustomValue")
            #expect(plain.header("Accept") == "application/vnd.wheel+json")

            // `@Headers(["Accept": "application/json"])` on the endpoint keeps its own value.
            let own = try await probe.headers(trace: nil)
            #expect(own.header("Accept") == "application/json")
            #expect(own.header("Custom-Header") == "CustomValue")

            // On a redirect's next hop too.
            let redirected = try await client.value(for: Request(method: .get, url: url.appending(path: "redirect/302").appending(queryItems: [URLQueryItem(name: "to", value: "/echo/items/b")])), as: Echo.self)
            #expect(redirected.header("Custom-Header") == "CustomValue")
        }
    }
}
