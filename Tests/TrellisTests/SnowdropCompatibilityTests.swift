import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Testing
import Trellis

/// The Snowdrop README's examples, with `import Trellis`, against a real server.
@Service
protocol MyEndpoint {
    @GET(url: "/posts")
    func getAllPosts() async throws -> [Post]

    @GET(url: "/posts/{id}")
    func getPost(id: Int) async throws -> Post

    @POST(url: "/posts")
    @Body("model")
    func addPost(model: NewPost) async throws -> Data
}

/// Snowdrop 0.1's spelling: the URL on `@Service`, `MyEndpointService()`, and `queryItems:`.
@Service(url: "https://my-endpoint.com")
protocol MyReleaseEndpoint {
    @GET(url: "/echo/items/{id}")
    func getPost(id: Int) async throws -> Echo
}

@Suite("Snowdrop README examples")
struct SnowdropCompatibilityTests {
    @Test(arguments: TransportKind.allCases)
    func readmeExamplesRun(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let byBaseUrl = MyEndpointService(baseUrl: url)
            #expect(byBaseUrl.client.baseURL == url)

            let service = MyEndpointService(client: Client(baseURL: url, transport: kind.transport))
            #expect(try await service.getAllPosts().count == 2)
            let authorName = "John Smith"
            let post = try await service.getPost(id: 7, _queryItems: [.init(key: "author", value: authorName)])
            #expect(post.id == 7)
            let data = try await service.addPost(model: NewPost(title: "Snow"))
            #expect(try JSONDecoder().decode(Post.self, from: data) == Post(id: 100, title: "Snow"))

            service.beforeSending = { request in request }
            service.onResponse = { data, _ in data }
            #expect(try await service.getPost(id: 3).title == "Post 3")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func releaseNotesExamplesRun(_ kind: TransportKind) async throws {
        let service = MyReleaseEndpointService()
        #expect(service.client.baseURL == URL(string: "https://my-endpoint.com"))
        try await TestServer.with(TestRoutes.install) { url in
            let service = MyReleaseEndpointService(client: Client(baseURL: url, transport: kind.transport))
            let authorName = "John Smith"
            let echo = try await service.getPost(id: 7, queryItems: [.init(name: "author", value: authorName)])
            #expect(echo.segments == ["echo", "items", "7"])
            #expect(echo.query == "author=John%20Smith")
            let firstSpelling = try await service.getPost(id: 7, _queryItems: [.init(name: "author", value: authorName)])
            #expect(firstSpelling.query == echo.query)
        }
    }
}

/// Snowdrop's settings that take effect on every call, and its rarer methods.
@Service
protocol SnowdropSettings {
    @GET(url: "/snow/protected")
    @RequiresAccessToken
    func protected() async throws -> SnakePost

    @GET(url: "/snow/snake")
    func snake() async throws -> SnakePost

    @TRACE(url: "/snow/trace")
    func trace() async throws -> String
}

/// Snowdrop's `@CONNECT`, sent to a raw server that records what arrives.
@Service
protocol SnowdropTunnel {
    @CONNECT(url: "/record")
    func connect() async throws -> String
}

struct SnakePost: Codable, Sendable, Equatable {
    var postId: Int
    var postTitle: String
}

@Suite("Snowdrop settings against the real server")
struct SnowdropSettingsTests {
    private static func install(_ router: Router<BasicRequestContext>) {
        let snake = #"{"post_id": 3, "post_title": "Snow"}"#
        router.get("snow/snake") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: snake)))
        }
        // Refuses a stale token with 403, as some servers do, rather than 401.
        router.get("snow/protected") { request, _ in
            guard request.headers[.authorization] == "Bearer fresh" else { return Hummingbird.Response(status: .forbidden) }
            return Hummingbird.Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: snake)))
        }
        router.on("snow/trace", method: .trace) { request, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: request.method.rawValue)))
        }
    }

    /// Snowdrop: `Snowdrop.Config.defaultJSONDecoder = decoder`; Trellis: per client.
    @Test(arguments: TransportKind.allCases)
    func aCustomJSONDecoderDecodesEveryResponse(_ kind: TransportKind) async throws {
        try await TestServer.with(Self.install) { url in
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            let service = SnowdropSettingsService(client: Client(baseURL: url, transport: kind.transport) { $0.coding.decoder = decoder })
            let post = try await service.snake()
            #expect(post == SnakePost(postId: 3, postTitle: "Snow"))
        }
    }

    /// Snowdrop: `Snowdrop.Config.accessTokenErrorCodes = [403]`.
    @Test(arguments: TransportKind.allCases)
    func accessTokenErrorCodesOtherThan401TriggerTheRefresh(_ kind: TransportKind) async throws {
        try await TestServer.with(Self.install) { url in
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            let storage = InMemoryAccessTokenStorage([AccessTokenRequirement.defaultLabel: AccessToken(accessToken: "stale")])
            let client = Client(baseURL: url, transport: kind.transport) {
                $0.coding.decoder = decoder
                $0.accessTokens.storage = storage
                $0.accessTokens.accessTokenErrorCodes = [403]
            }
            let service = SnowdropSettingsService(client: client)
            let refreshes = NIOLockedValueBox(0)
            service.onAuthRetry = { _ in
                refreshes.withLockedValue { $0 += 1 }
                return AccessToken(accessToken: "fresh")
            }
            let post = try await service.protected()
            #expect(post.postId == 3)
            #expect(refreshes.withLockedValue { $0 } == 1)
            let stored = try await storage.fetch(for: AccessTokenRequirement.defaultLabel)
            #expect(stored?.accessToken == "fresh")
        }
    }

    /// What the server does with it is its business (a proxy would open a tunnel); the request
    /// goes out with the CONNECT method and the call ends either way.
    @Test func connectIsSentAsConnect() async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: TransportKind.asyncHTTPClient.transport) { $0.timeouts.request = .seconds(10) }
            _ = try? await SnowdropTunnelService(client: client).connect()
            #expect(server.heads.first?.hasPrefix("CONNECT /record HTTP/1.1") == true, "the server read \(server.heads)")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func traceIsSentAsTrace(_ kind: TransportKind) async throws {
        try await TestServer.with(Self.install) { url in
            let service = SnowdropSettingsService(client: Client(baseURL: url, transport: kind.transport))
            let method = try await service.trace()
            #expect(method == "TRACE")
        }
    }
}
