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
}
