// `swift run --package-path Demo trellis-demo`: starts a small blog API in this process on 127.0.0.1 (a free port),
// declares a service for it with Trellis's macros, and walks through the features, printing
// what goes over the wire. It exits by itself.
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import Trellis

// MARK: The client side: a service declared as a protocol

struct Post: Codable, Sendable {
    var id: Int
    var title: String
}

struct NewPost: Codable, Sendable {
    var title: String
}

struct Comment: Codable, Sendable {
    var id: Int
    var text: String
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

    @GET("/posts/{id}")
    func find(id: Int) async throws -> Post?
}

// MARK: The server side: an in-memory blog

actor Store {
    var posts = [1: Post(id: 1, title: "Hello, Trellis"), 2: Post(id: 2, title: "Declaring APIs as protocols")]
    var nextID = 3

    func all() -> [Post] { posts.values.sorted { $0.id < $1.id } }
    func post(_ id: Int) -> Post? { posts[id] }
    func add(_ new: NewPost) -> Post {
        defer { nextID += 1 }
        let post = Post(id: nextID, title: new.title)
        posts[nextID] = post
        return post
    }
    func remove(_ id: Int) -> Bool { posts.removeValue(forKey: id) != nil }
}

func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Hummingbird.Response {
    Hummingbird.Response(
        status: status,
        headers: [.contentType: "application/json"],
        body: .init(byteBuffer: ByteBuffer(data: try JSONEncoder().encode(value)))
    )
}

func notFound(_ id: Int) -> Hummingbird.Response {
    let problem = #"{"title":"No such post","status":404,"detail":"There is no post \#(id)"}"#
    return Hummingbird.Response(
        status: .notFound,
        headers: [.contentType: "application/problem+json"],
        body: .init(byteBuffer: ByteBuffer(string: problem))
    )
}

func demoRouter(_ store: Store, issuer: TokenIssuer, shop: Shop) -> Router<BasicRequestContext> {
    let router = Router()
    issuer.install(router)
    MediaRoutes.install(router)
    QuoteRoutes.install(router)
    FlakyDependencyRoutes.install(router)
    shop.install(router)
    router.get("posts") { _, _ in try json(await store.all()) }
    // Moved for good: the newest post lives at its own address.
    router.get("latest") { _, _ in
        Hummingbird.Response(status: .movedPermanently, headers: [.location: "/posts/\(await store.all().last?.id ?? 1)"])
    }
    router.get("posts/:id") { _, context in
        let id = try context.parameters.require("id", as: Int.self)
        guard let post = await store.post(id) else { return notFound(id) }
        return try json(post)
    }
    router.head("posts/:id") { _, context in
        let id = try context.parameters.require("id", as: Int.self)
        return Hummingbird.Response(status: await store.post(id) == nil ? .notFound : .ok, headers: [.eTag: "\"v\(id)\""])
    }
    router.get("posts/:id/comments") { request, context in
        let id = try context.parameters.require("id", as: Int.self)
        return try json([Comment(id: 1, text: "post \(id), query: \(request.uri.query ?? "")")])
    }
    router.post("posts") { request, context in
        try json(await store.add(try await request.decode(as: NewPost.self, context: context)), status: .created)
    }
    // Cookies: the first visit sets one, later requests show what they carried.
    router.get("visit/start") { _, _ in
        Hummingbird.Response(status: .ok, headers: [.setCookie: "visitor=ada; Path=/visit; Max-Age=600; HttpOnly"])
    }
    router.get("visit/again") { request, _ in
        "you sent: \(request.headers[.cookie] ?? "no cookie")"
    }
    // An HTTP cache: a daily digest with an ETag, revalidated on every use.
    router.get("digest") { request, _ in
        if request.headers[.ifNoneMatch] == "\"day-1\"" {
            return Hummingbird.Response(status: .notModified, headers: [.eTag: "\"day-1\"", .init("X-Answered")!: "304 Not Modified"])
        }
        return Hummingbird.Response(
            status: .ok,
            headers: [.eTag: "\"day-1\"", .cacheControl: "no-cache", .init("X-Answered")!: "200 with the body"],
            body: .init(byteBuffer: ByteBuffer(string: "Today: Trellis learned to cache."))
        )
    }
    router.delete("posts/:id") { _, context in
        let id = try context.parameters.require("id", as: Int.self)
        return await store.remove(id) ? Hummingbird.Response(status: .noContent) : notFound(id)
    }
    return router
}

// MARK: The tour

func step(_ title: String) {
    print("\n== \(title)")
}

func tour(_ baseURL: URL, session: HTTPArchiveMonitor) async throws {
    // Every exchange of the tour's clients is recorded as HAR, written at the end.
    let blog = BlogService(client: Client(baseURL: baseURL) { $0.observability.eventMonitors = [session] })
    blog.beforeSending = { request in
        print("  → \(request.method) \(request.urlString)")
        return request
    }
    blog.onResponse = { response, _ in
        print("  ← \(response.status.code) \(String(decoding: response.body.prefix(120), as: UTF8.self))")
        return response
    }

    step("GET a list, decoded as [Post]")
    for post in try await blog.posts() { print("  #\(post.id) \(post.title)") }

    step("GET one post: {id} becomes one percent-encoded path segment")
    print("  \(try await blog.post(id: 2).title)")

    step("Static query (?sort=new) merged with parameters; nil is left out, arrays repeat the key")
    _ = try await blog.comments(id: 2, page: nil, tags: ["swift", "http client"])

    step("A {id=1} default: the call without that argument")
    _ = try await blog.comments(page: 3, tags: [])

    step("Extra query items at the call site (queryItems:)")
    _ = try await blog.post(id: 1, queryItems: [QueryItem(name: "fields", value: "title")])

    step("POST with an Encodable @Body, sent as JSON")
    let created = try await blog.create(post: NewPost(title: "Written with Trellis"))
    print("  created #\(created.id)")

    step("HEAD as Response<Void>: status and headers")
    let head = try await blog.exists(id: created.id)
    print("  status \(head.status.code), ETag \(head.headerFields[.eTag] ?? "none")")

    step("DELETE returning Void")
    try await blog.delete(id: created.id)

    step("An Optional return type is nil on 404")
    print("  find(id: \(created.id)) = \(String(describing: try await blog.find(id: created.id)))")

    step("Errors you can switch on: RFC 9457 problem details are decoded")
    do {
        _ = try await blog.post(id: 99)
    } catch TrellisError.unacceptableStatus(let failure) {
        print("  \(failure.status.code): \(failure.problem?.detail ?? "?")")
    }

    step("A request as a curl command, credentials redacted")
    var request = try Trellis.Request(method: .get, url: baseURL.appending(path: "posts"))
    try request.setHeader("Authorization", "Bearer secret")
    print(request.cURLDescription.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))

    step("Cookies: what the server sets is kept and sent back where it applies")
    let visitor = Client(baseURL: baseURL) { $0.observability.eventMonitors = [session] }
    _ = try await visitor.data(for: Trellis.Request(method: .get, url: baseURL.appending(path: "visit/start")))
    for cookie in visitor.configuration.cookies?.cookies ?? [] {
        print("  kept \(cookie.name) for \(cookie.domain)\(cookie.path), HttpOnly \(cookie.isHTTPOnly)")
    }
    let again = try await visitor.data(for: Trellis.Request(method: .get, url: baseURL.appending(path: "visit/again")))
    print("  the server says: \(String(decoding: again.body, as: UTF8.self))")

    step("An HTTP cache: the second call revalidates with If-None-Match and is answered 304")
    let cached = Client(baseURL: baseURL) {
        $0.cache = HTTPCache()
        $0.observability.eventMonitors = [session]
    }
    for call in 1...2 {
        let digest = try await cached.data(for: Trellis.Request(method: .get, url: baseURL.appending(path: "digest")))
        let answered = digest.headerFields[HTTPField.Name("X-Answered")!] ?? "?"
        print("  call \(call): \(digest.status.code) \"\(String(decoding: digest.body, as: UTF8.self))\" (the server: \(answered))")
    }

    step("Bad input is refused before anything is sent")
    do {
        try request.setHeader("X-Note", "line\r\nInjected: 1")
    } catch {
        print("  \(error)")
    }
}

func runDemo() async -> Int32 {
    let shop = Shop()
    var serverLogger = Logger(label: "demo-server")
    serverLogger.logLevel = .warning
    let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
    let issuer = TokenIssuer()
    let app = Application(
        router: demoRouter(Store(), issuer: issuer, shop: shop),
        server: .http1WebSocketUpgrade(webSocketRouter: EchoRoutes.router()),
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in portSink.yield(channel.localAddress?.port ?? 0) },
        logger: serverLogger
    )
    let server = Task { try await app.run() }
    defer { server.cancel() }
    var portIterator = ports.makeAsyncIterator()
    guard let port = await portIterator.next() else {
        print("The demo server did not start.")
        return 1
    }
    print("Demo API listening on http://127.0.0.1:\(port)")
    do {
        let baseURL = URL(string: "http://127.0.0.1:\(port)")!
        let sessionFile = FileManager.default.temporaryDirectory.appending(path: "trellis-demo-session.har")
        let session = HTTPArchiveMonitor(writingTo: sessionFile)
        try await tour(baseURL, session: session)
        try await authorizationTour(baseURL, issuer: issuer)
        try await transferTour(baseURL)
        try await realtimeTour(baseURL)
        try await observabilityTour(baseURL)
        try await openAPITour(baseURL)
        try await connectivityTour(baseURL)
        try await resilienceTour(baseURL)
        try await outboxTour(baseURL, shop: shop)
        step("The first tour's session as HAR, credentials redacted")
        try session.write()
        let entries = session.recorder.archive.log.entries
        print("  \(entries.count) exchanges written to \(sessionFile.path)")
        print("  open it in a browser's network panel (Import HAR), or replay it in a test with TrellisTesting's ReplayTransport")
        print("\nDone.")
        return 0
    } catch {
        print("\nThe tour failed: \(error)")
        return 1
    }
}

if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "outbox-worker", let url = URL(string: CommandLine.arguments[3]) {
    exit(await runOutboxWorker(file: CommandLine.arguments[2], url: url))
}
exit(await runDemo())
