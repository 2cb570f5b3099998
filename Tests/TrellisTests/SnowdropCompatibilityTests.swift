import Foundation
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
