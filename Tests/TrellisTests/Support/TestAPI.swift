import Foundation
import HTTPTypes
import Hummingbird
import Trellis

struct Post: Codable, Equatable, Sendable {
    var id: Int
    var title: String
}

struct NewPost: Codable, Sendable {
    var title: String
}

struct Comment: Codable, Equatable, Sendable {
    var id: Int
    var text: String
}

struct Login: Codable, Sendable {
    var user: String
    var password: String
    var remember: Bool
    var scopes: [String]
}

enum Sort: String, Sendable {
    case new, top
}

/// What the server received, as it received it.
struct Echo: Codable, Sendable {
    var method: String
    /// The path as sent, still percent-encoded.
    var path: String
    /// The query as sent, still percent-encoded.
    var query: String
    /// Header values by lowercased name.
    var headers: [String: String]
    var body: String

    func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The percent-decoded path segments.
    var segments: [String] {
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map {
            String($0).removingPercentEncoding ?? String($0)
        }
    }

    /// The query items, decoded, in order.
    var queryItems: [URLQueryItem] {
        var components = URLComponents()
        components.percentEncodedQuery = query.isEmpty ? nil : query
        return components.queryItems ?? []
    }

    func values(of name: String) -> [String] {
        queryItems.filter { $0.name == name }.map { $0.value ?? "" }
    }
}

@Service
protocol Blog {
    @GET("/posts")
    func posts() async throws -> [Post]

    @GET("/posts/{id}")
    func post(id: Int) async throws -> Post

    @GET("/posts/{id=1}/comments?sort=new")
    func comments(id: Int, page: Int?, tags: [String]) async throws -> [Comment]

    @POST("/posts")
    @Body("post")
    func create(post: NewPost) async throws -> Post

    @DELETE("/posts/{id}")
    func delete(id: Int) async throws

    @HEAD("/posts/{id}")
    func exists(id: Int) async throws -> Trellis.Response<Void>
}

/// Endpoints that answer with what the server received, one per kind of parameter.
@Service
protocol Probe {
    @GET("/echo/items/{value}")
    func segment(value: String) async throws -> Echo

    @GET(url: "/echo/query?fixed=1")
    func query(text: String?, number: Int?, flag: Bool, ratio: Double, sort: Sort?, tags: [String], when: Date?) async throws -> Echo

    @POST("/echo/body")
    @Body("data")
    func send(data: Data) async throws -> Echo

    @POST("/echo/body")
    @Body("text")
    func send(text: String) async throws -> Echo

    @PUT("/echo/body")
    @Body("post")
    func send(post: NewPost) async throws -> Echo

    @POST("/echo/body")
    @Body("post")
    @Headers(["Content-Type": "application/vnd.trellis+json"])
    func sendVendor(post: NewPost) async throws -> Echo

    @POST("/echo/form")
    @FormURLEncoded
    func form(name: String, note: String?, tags: [String]) async throws -> Echo

    @POST("/echo/form")
    @FormURLEncoded
    @Body("login")
    func form(login: Login) async throws -> Echo

    @GET("/echo/headers")
    @Header("X-Trace", "trace")
    @Headers(["X-Static": "yes", "Accept": "application/json"])
    func headers(trace: String?) async throws -> Echo

    @PATCH("/echo/patch")
    func patch() async throws -> Echo

    @OPTIONS("/echo/options")
    func options() async throws -> Echo

    @QUERY("/echo/query-method")
    @Body("text")
    func queryMethod(text: String) async throws -> Echo

    @PUT("/echo/{kind}/{id=7}")
    func defaults(kind: String, id: Int) async throws -> Echo

    @GET("/text")
    func text() async throws -> String

    @GET("/bytes")
    func bytes() async throws -> Data

    @GET("/status/204")
    func noContent() async throws -> Post?

    @GET("/status/404")
    func missing() async throws -> Post?

    @GET("/posts/{id}")
    func present(id: Int) async throws -> Post?

    @GET("/posts/{id}")
    func response(id: Int) async throws -> Trellis.Response<Post>

    @GET("/problem")
    func problem() async throws -> Post

    @GET("/rich")
    func rich() async throws -> Post

    @GET("/html")
    func html() async throws -> Post

    @GET("/status/204")
    func empty() async throws -> Post

    @GET("/unauthorized")
    func unauthorized() async throws -> Post

    @GET("/status/{code}")
    func status(code: Int) async throws
}

/// The server side of ``Blog`` and ``Probe``.
enum TestRoutes {
    static let bytes = Data((0...255).map { UInt8($0) } + [0, 0xFF, 0x0A, 0x0D])

    static func install(_ router: Router<BasicRequestContext>) {
        router.get("posts") { _, _ in
            try json([Post(id: 1, title: "First"), Post(id: 2, title: "Second")])
        }
        router.get("posts/:id") { _, context in
            let id = try context.parameters.require("id", as: Int.self)
            if id == 404 { return Response(status: .notFound) }
            return try json(Post(id: id, title: "Post \(id)"))
        }
        router.head("posts/:id") { _, context in
            let id = try context.parameters.require("id", as: Int.self)
            return Response(status: id == 404 ? .notFound : .ok, headers: [.eTag: "\"post-\(id)\""])
        }
        router.get("posts/:id/comments") { request, context in
            let id = try context.parameters.require("id", as: Int.self)
            return try json([Comment(id: id, text: request.uri.query ?? "")])
        }
        router.post("posts") { request, context in
            let new = try await request.decode(as: NewPost.self, context: context)
            return try json(Post(id: 100, title: new.title), status: .created)
        }
        router.delete("posts/:id") { _, _ in
            Response(status: .noContent)
        }
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete, .options, .query] {
            router.on("echo/**", method: method) { request, _ in
                var request = request
                let body = try await request.collectBody(upTo: 1 << 20)
                var headers: [String: String] = [:]
                for field in request.headers {
                    headers[field.name.canonicalName] = headers[field.name.canonicalName].map { $0 + ", " + field.value } ?? field.value
                }
                let echo = Echo(
                    method: request.method.rawValue,
                    path: request.uri.path,
                    query: request.uri.query ?? "",
                    headers: headers,
                    body: String(buffer: body)
                )
                return try json(echo)
            }
        }
        for method in [HTTPRequest.Method.get, .post, .put] {
            router.on("redirect/:code", method: method) { request, context in
                let code = try context.parameters.require("code", as: Int.self)
                return Response(status: .init(code: code), headers: [.location: request.uri.queryParameters.get("to") ?? "/"])
            }
        }
        router.get("stall") { _, _ in
            // Announces 100 bytes, sends 10, then never sends the rest: a body that stalls.
            Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(contentLength: 100) { writer in
                try await writer.write(ByteBuffer(string: "0123456789"))
                try await Task.sleep(for: .seconds(3600))
            })
        }
        router.get("chunked/:size") { _, context in
            // Chunked, so the size is only known by reading it.
            let size = try context.parameters.require("size", as: Int.self)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init { writer in
                var remaining = size
                while remaining > 0 {
                    let chunk = min(remaining, 16_384)
                    try await writer.write(ByteBuffer(repeating: 0x61, count: chunk))
                    remaining -= chunk
                }
                try await writer.finish(nil)
            })
        }
        router.get("loop/:n") { _, context in
            let n = try context.parameters.require("n", as: Int.self)
            return Response(status: .found, headers: [.location: "/loop/\((n + 1) % 2)"])
        }
        router.get("text") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: "héllo, world")))
        }
        router.get("bytes") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        router.get("status/:code") { _, context in
            Response(status: .init(code: try context.parameters.require("code", as: Int.self)))
        }
        router.get("problem") { _, _ in
            Response(
                status: .unprocessableContent,
                headers: [.contentType: "application/problem+json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"type":"https://example.com/out-of-stock","title":"Out of stock","status":422,"detail":"Item 7 is sold out"}"#))
            )
        }
        router.get("rich") { _, _ in
            Response(
                status: .badRequest,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"error":"Invalid coupon","domainCode":4021}"#))
            )
        }
        router.get("html") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/html"],
                body: .init(byteBuffer: ByteBuffer(string: "<html><body>Not JSON</body></html>"))
            )
        }
        router.get("unauthorized") { _, _ in
            Response(
                status: .unauthorized,
                headers: [.wwwAuthenticate: "Basic realm=\"trellis\"", .contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"error":"Sign in first"}"#))
            )
        }
    }

    static func json<Value: Encodable>(_ value: Value, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(data: try JSONEncoder().encode(value)))
        )
    }
}
