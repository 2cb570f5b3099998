import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing
import TrellisMacros

let trellisMacros: [String: MacroSpec] = [
    "Service": MacroSpec(type: ServiceMacro.self),
    "GET": MacroSpec(type: HTTPMethodMacro.self),
    "POST": MacroSpec(type: HTTPMethodMacro.self),
    "PUT": MacroSpec(type: HTTPMethodMacro.self),
    "DELETE": MacroSpec(type: HTTPMethodMacro.self),
    "PATCH": MacroSpec(type: HTTPMethodMacro.self),
    "HEAD": MacroSpec(type: HTTPMethodMacro.self),
    "OPTIONS": MacroSpec(type: HTTPMethodMacro.self),
    "QUERY": MacroSpec(type: HTTPMethodMacro.self),
    "TRACE": MacroSpec(type: HTTPMethodMacro.self),
    "CONNECT": MacroSpec(type: HTTPMethodMacro.self),
    "Body": MacroSpec(type: MarkerMacro.self),
    "Header": MacroSpec(type: MarkerMacro.self),
    "Headers": MacroSpec(type: MarkerMacro.self),
    "FormURLEncoded": MacroSpec(type: MarkerMacro.self),
    "TokenLabel": MacroSpec(type: TokenLabelMacro.self),
    "RequiresAccessToken": MacroSpec(type: HTTPMethodMacro.self),
    "Download": MacroSpec(type: HTTPMethodMacro.self),
    "WebSocket": MacroSpec(type: HTTPMethodMacro.self),
    "FileUpload": MacroSpec(type: HTTPMethodMacro.self),
    "Retry": MacroSpec(type: HTTPMethodMacro.self),
]

/// Expands with Swift Testing reporting failures where the assertion stands.
func assertExpansion(
    _ source: String,
    expandedSource: String,
    diagnostics: [DiagnosticSpec] = [],
    applyFixIts: [String]? = nil,
    fixedSource: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    assertMacroExpansion(
        source,
        expandedSource: expandedSource,
        diagnostics: diagnostics,
        macroSpecs: trellisMacros,
        applyFixIts: applyFixIts,
        fixedSource: fixedSource,
        failureHandler: { failure in
            Issue.record(Comment(rawValue: failure.message), sourceLocation: sourceLocation)
        }
    )
}

@Suite("@Service expansion")
struct ExpansionTests {
    @Test func simpleGetWithPathParameter() {
        assertExpansion(
            """
            @Service
            protocol Blog {
                @GET("/posts/{id}")
                func post(id: Int) async throws -> Post
            }
            """,
            expandedSource: #"""
            protocol Blog {
                func post(id: Int) async throws -> Post
            }

            final class BlogService: Blog, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func post(id: Int) async throws -> Post {
                    return try await self.post(id: id, queryItems: [])
                }

                func post(id: Int, queryItems _queryItems: [Trellis.QueryItem]) async throws -> Post {
                    var __request = try self._serviceCore.request(.get, path: "/posts/\(Trellis._RequestBuilder.pathSegment(id, name: "id"))", query: "", template: "/posts/{id}")
                    __request.queryItems(_queryItems)
                    #sourceLocation(file: "test.swift", line: 4)
                    return try await self._serviceCore.value(__request, as: Post.self)
                    #sourceLocation()
                }
            }
            """#
        )
    }

    @Test func serviceURLAddsAnInitializerForIt() {
        assertExpansion(
            """
            @Service(url: "https://my-endpoint.com")
            protocol MyEndpoint {
                @GET(url: "/posts")
                func getAllPosts() async throws -> [Post]
            }
            """,
            expandedSource: #"""
            protocol MyEndpoint {
                func getAllPosts() async throws -> [Post]
            }

            final class MyEndpointService: MyEndpoint, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                /// A service for https://my-endpoint.com (`@Service(url:)`) over the platform's default transport.
                convenience init() {
                    self.init(baseURL: Foundation.URL(string: "https://my-endpoint.com")!)
                }

                func getAllPosts() async throws -> [Post] {
                    return try await self.getAllPosts(queryItems: [])
                }

                func getAllPosts(_queryItems: [Trellis.QueryItem]) async throws -> [Post] {
                    return try await self.getAllPosts(queryItems: _queryItems)
                }

                func getAllPosts(queryItems _queryItems: [Trellis.QueryItem]) async throws -> [Post] {
                    var __request = self._serviceCore.request(.get, path: "/posts", query: "", template: "/posts")
                    __request.queryItems(_queryItems)
                    #sourceLocation(file: "test.swift", line: 4)
                    return try await self._serviceCore.value(__request, as: [Post].self)
                    #sourceLocation()
                }
            }
            """#
        )
    }

    @Test func publicServiceWithEveryParameterKind() {
        assertExpansion(
            """
            @Service
            public protocol Blog {
                @POST(url: "/posts/{id=1}/comments?sort=new")
                @Body("comment")
                @Header("X-Trace", "trace")
                @Headers(["Accept": "application/json"])
                func comment(id: Int, comment: NewComment, trace: String?, page: Int?, tags: [String]) async throws -> Response<Comment>
            }
            """,
            expandedSource: #"""
            public protocol Blog {
                func comment(id: Int, comment: NewComment, trace: String?, page: Int?, tags: [String]) async throws -> Response<Comment>
            }

            public final class BlogService: Blog, Trellis.TrellisService {
                public let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                public static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                public init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                public convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                public func comment(id: Int, comment: NewComment, trace: String?, page: Int?, tags: [String]) async throws -> Response<Comment> {
                    return try await self.comment(id: id, comment: comment, trace: trace, page: page, tags: tags, queryItems: [])
                }

                public func comment(id: Int, comment: NewComment, trace: String?, page: Int?, tags: [String], _queryItems: [Trellis.QueryItem]) async throws -> Response<Comment> {
                    return try await self.comment(id: id, comment: comment, trace: trace, page: page, tags: tags, queryItems: _queryItems)
                }

                public func comment(id: Int, comment: NewComment, trace: String?, page: Int?, tags: [String], queryItems _queryItems: [Trellis.QueryItem]) async throws -> Response<Comment> {
                    var __request = try self._serviceCore.request(.post, path: "/posts/\(Trellis._RequestBuilder.pathSegment(id, name: "id"))/comments", query: "sort=new", template: "/posts/{id=1}/comments?sort=new")
                    try __request.header("Accept", "application/json")
                    try __request.header("X-Trace", trace)
                    try __request.body(comment)
                    #sourceLocation(file: "test.swift", line: 7)
                    __request.query("page", page)
                    #sourceLocation()
                    #sourceLocation(file: "test.swift", line: 7)
                    __request.query("tags", tags)
                    #sourceLocation()
                    __request.queryItems(_queryItems)
                    #sourceLocation(file: "test.swift", line: 7)
                    return try await self._serviceCore.response(__request, as: Comment.self)
                    #sourceLocation()
                }
            }

            extension Blog {
                public func comment(comment: NewComment, trace: String?, page: Int?, tags: [String]) async throws -> Response<Comment> {
                    return try await self.comment(id: 1, comment: comment, trace: trace, page: page, tags: tags)
                }
            }
            """#
        )
    }

    @Test func voidResponseVoidFormAndStringDefault() {
        assertExpansion(
            """
            @Service
            protocol AccountService {
                @DELETE("/users/{name=me}")
                func remove(name: String) async throws

                @HEAD("/users/{name}")
                func exists(_ name: String) async throws -> Response<Void>

                @PUT("/profile")
                @FormURLEncoded
                func update(displayName: String, bio: String?) async throws
            }
            """,
            expandedSource: #"""
            protocol AccountService {
                func remove(name: String) async throws
                func exists(_ name: String) async throws -> Response<Void>
                func update(displayName: String, bio: String?) async throws
            }

            final class AccountServiceImpl: AccountService, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func remove(name: String) async throws {
                    try await self.remove(name: name, queryItems: [])
                }

                func remove(name: String, queryItems _queryItems: [Trellis.QueryItem]) async throws {
                    var __request = try self._serviceCore.request(.delete, path: "/users/\(Trellis._RequestBuilder.pathSegment(name, name: "name"))", query: "", template: "/users/{name=me}")
                    __request.queryItems(_queryItems)
                    try await self._serviceCore.perform(__request)
                }

                func exists(_ name: String) async throws -> Response<Void> {
                    return try await self.exists(name, queryItems: [])
                }

                func exists(_ name: String, queryItems _queryItems: [Trellis.QueryItem]) async throws -> Response<Void> {
                    var __request = try self._serviceCore.request(.head, path: "/users/\(Trellis._RequestBuilder.pathSegment(name, name: "name"))", query: "", template: "/users/{name}")
                    __request.queryItems(_queryItems)
                    return try await self._serviceCore.response(__request)
                }

                func update(displayName: String, bio: String?) async throws {
                    try await self.update(displayName: displayName, bio: bio, queryItems: [])
                }

                func update(displayName: String, bio: String?, queryItems _queryItems: [Trellis.QueryItem]) async throws {
                    var __request = self._serviceCore.request(.put, path: "/profile", query: "", template: "/profile")
                    __request.startForm()
                    #sourceLocation(file: "test.swift", line: 11)
                    __request.formField("displayName", displayName)
                    #sourceLocation()
                    #sourceLocation(file: "test.swift", line: 11)
                    __request.formField("bio", bio)
                    #sourceLocation()
                    __request.queryItems(_queryItems)
                    try await self._serviceCore.perform(__request)
                }
            }

            extension AccountService {
                func remove() async throws {
                    try await self.remove(name: "me")
                }
            }
            """#
        )
    }

    @Test func tokenLabelAndRequiresAccessToken() {
        assertExpansion(
            """
            @Service
            @TokenLabel("blog")
            protocol Blog {
                @GET("/me") @RequiresAccessToken
                func me() async throws -> User
            }
            """,
            expandedSource: #"""
            protocol Blog {

                func me() async throws -> User
            }

            final class BlogService: Blog, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = "blog"

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func me() async throws -> User {
                    return try await self.me(queryItems: [])
                }

                func me(queryItems _queryItems: [Trellis.QueryItem]) async throws -> User {
                    var __request = self._serviceCore.request(.get, path: "/me", query: "", template: "/me")
                    __request.queryItems(_queryItems)
                    __request.requiresAccessToken = true
                    #sourceLocation(file: "test.swift", line: 5)
                    return try await self._serviceCore.value(__request, as: User.self)
                    #sourceLocation()
                }
            }
            """#
        )
    }

    @Test func downloadsReturnAFileAFileRecordOrATask() {
        assertExpansion(
            """
            @Service
            protocol Files {
                @GET("/files/{name}") @Download
                func fetch(name: String) async throws -> URL
                @GET("/files/{name}") @Download
                func record(name: String) async throws -> DownloadedFile
                @GET("/files/{name}") @Download
                func task(name: String) async throws -> DownloadTask
            }
            """,
            expandedSource: #"""
            protocol Files {

                func fetch(name: String) async throws -> URL

                func record(name: String) async throws -> DownloadedFile

                func task(name: String) async throws -> DownloadTask
            }

            final class FilesService: Files, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func fetch(name: String) async throws -> URL {
                    return try await self.fetch(name: name, queryItems: [])
                }

                func fetch(name: String, queryItems _queryItems: [Trellis.QueryItem]) async throws -> URL {
                    var __request = try self._serviceCore.request(.get, path: "/files/\(Trellis._RequestBuilder.pathSegment(name, name: "name"))", query: "", template: "/files/{name}")
                    __request.queryItems(_queryItems)
                    return try await self._serviceCore.download(__request).url
                }

                func record(name: String) async throws -> DownloadedFile {
                    return try await self.record(name: name, queryItems: [])
                }

                func record(name: String, queryItems _queryItems: [Trellis.QueryItem]) async throws -> DownloadedFile {
                    var __request = try self._serviceCore.request(.get, path: "/files/\(Trellis._RequestBuilder.pathSegment(name, name: "name"))", query: "", template: "/files/{name}")
                    __request.queryItems(_queryItems)
                    return try await self._serviceCore.download(__request)
                }

                func task(name: String) async throws -> DownloadTask {
                    return try await self.task(name: name, queryItems: [])
                }

                func task(name: String, queryItems _queryItems: [Trellis.QueryItem]) async throws -> DownloadTask {
                    var __request = try self._serviceCore.request(.get, path: "/files/\(Trellis._RequestBuilder.pathSegment(name, name: "name"))", query: "", template: "/files/{name}")
                    __request.queryItems(_queryItems)
                    return try self._serviceCore.downloadTask(__request)
                }
            }
            """#
        )
    }

    @Test func conversationsOpenAWebSocketOrAnEventStream() {
        assertExpansion(
            """
            @Service
            protocol Live {
                @WebSocket("/chat/{room}") @RequiresAccessToken
                func chat(room: String) async throws -> WebSocketConnection
                @GET("/quotes")
                func quotes() async throws -> EventStream<Quote>
                @GET("/events")
                func events() async throws -> EventStream<ServerSentEvent>
            }
            """,
            expandedSource: #"""
            protocol Live {

                func chat(room: String) async throws -> WebSocketConnection
                func quotes() async throws -> EventStream<Quote>
                func events() async throws -> EventStream<ServerSentEvent>
            }

            final class LiveService: Live, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func chat(room: String) async throws -> WebSocketConnection {
                    return try await self.chat(room: room, queryItems: [])
                }

                func chat(room: String, queryItems _queryItems: [Trellis.QueryItem]) async throws -> WebSocketConnection {
                    var __request = try self._serviceCore.request(.get, path: "/chat/\(Trellis._RequestBuilder.pathSegment(room, name: "room"))", query: "", template: "/chat/{room}")
                    __request.queryItems(_queryItems)
                    __request.requiresAccessToken = true
                    return try await self._serviceCore.webSocket(__request)
                }

                func quotes() async throws -> EventStream<Quote> {
                    return try await self.quotes(queryItems: [])
                }

                func quotes(queryItems _queryItems: [Trellis.QueryItem]) async throws -> EventStream<Quote> {
                    var __request = self._serviceCore.request(.get, path: "/quotes", query: "", template: "/quotes")
                    __request.queryItems(_queryItems)
                    return try self._serviceCore.events(__request, as: Quote.self)
                }

                func events() async throws -> EventStream<ServerSentEvent> {
                    return try await self.events(queryItems: [])
                }

                func events(queryItems _queryItems: [Trellis.QueryItem]) async throws -> EventStream<ServerSentEvent> {
                    var __request = self._serviceCore.request(.get, path: "/events", query: "", template: "/events")
                    __request.queryItems(_queryItems)
                    return try self._serviceCore.events(__request)
                }
            }
            """#
        )
    }

    @Test func retrySetsTheEndpointsRetries() {
        assertExpansion(
            """
            @Service
            protocol Feed {
                @POST("/entries") @Retry(maximumRetries: 3, retriesNonIdempotentMethods: true)
                func add() async throws
            }
            """,
            expandedSource: #"""
            protocol Feed {

                func add() async throws
            }

            final class FeedService: Feed, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func add() async throws {
                    try await self.add(queryItems: [])
                }

                func add(queryItems _queryItems: [Trellis.QueryItem]) async throws {
                    var __request = self._serviceCore.request(.post, path: "/entries", query: "", template: "/entries")
                    __request.queryItems(_queryItems)
                    __request.maximumRetries = 3
                    __request.retriesNonIdempotentMethods = true
                    try await self._serviceCore.perform(__request)
                }
            }
            """#
        )
    }

    @Test func retryKeepsItsEarlierMaxSpelling() {
        assertExpansion(
            """
            @Service
            protocol Feed {
                @POST("/entries") @Retry(max: 3, retriesNonIdempotentMethods: true)
                func add() async throws
            }
            """,
            expandedSource: #"""
            protocol Feed {

                func add() async throws
            }

            final class FeedService: Feed, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func add() async throws {
                    try await self.add(queryItems: [])
                }

                func add(queryItems _queryItems: [Trellis.QueryItem]) async throws {
                    var __request = self._serviceCore.request(.post, path: "/entries", query: "", template: "/entries")
                    __request.queryItems(_queryItems)
                    __request.maximumRetries = 3
                    __request.retriesNonIdempotentMethods = true
                    try await self._serviceCore.perform(__request)
                }
            }
            """#
        )
    }

    @Test func fileUploadAddsSnowdropsPayloadDescription() {
        assertExpansion(
            """
            @Service
            protocol Profile {
                @POST(url: "/avatar") @FileUpload @Body("image")
                func upload(_ image: Data) async throws -> Data
            }
            """,
            expandedSource: #"""
            protocol Profile {

                func upload(_ image: Data) async throws -> Data
            }

            final class ProfileService: Profile, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func upload(_ image: Data) async throws -> Data {
                    return try await self.upload(image, payloadDescription: nil, queryItems: [])
                }

                func upload(_ image: Data, payloadDescription: Trellis.PayloadDescription) async throws -> Data {
                    return try await self.upload(image, payloadDescription: payloadDescription, queryItems: [])
                }

                func upload(_ image: Data, _payloadDescription: Trellis.PayloadDescription) async throws -> Data {
                    return try await self.upload(image, payloadDescription: _payloadDescription, queryItems: [])
                }

                func upload(_ image: Data, _payloadDescription: Trellis.PayloadDescription?, _queryItems: [Trellis.QueryItem]) async throws -> Data {
                    return try await self.upload(image, payloadDescription: _payloadDescription, queryItems: _queryItems)
                }

                func upload(_ image: Data, payloadDescription _payloadDescription: Trellis.PayloadDescription?, queryItems _queryItems: [Trellis.QueryItem]) async throws -> Data {
                    var __request = self._serviceCore.request(.post, path: "/avatar", query: "", template: "/avatar")
                    try __request.fileUpload(image, parameter: "image", description: _payloadDescription)
                    __request.queryItems(_queryItems)
                    #sourceLocation(file: "test.swift", line: 4)
                    return try await self._serviceCore.value(__request, as: Data.self)
                    #sourceLocation()
                }
            }
            """#
        )
    }

    @Test(arguments: [
        ("GET", ".get"), ("POST", ".post"), ("PUT", ".put"), ("DELETE", ".delete"), ("PATCH", ".patch"),
        ("HEAD", ".head"), ("OPTIONS", ".options"), ("QUERY", ".query"), ("TRACE", ".trace"), ("CONNECT", ".connect"),
    ])
    func everyMethodMacro(_ macro: String, _ method: String) {
        assertExpansion(
            """
            @Service
            protocol API {
                @\(macro)("/x")
                func call() async throws -> Data
            }
            """,
            expandedSource: #"""
            protocol API {
                func call() async throws -> Data
            }

            final class APIService: API, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func call() async throws -> Data {
                    return try await self.call(queryItems: [])
                }

                func call(queryItems _queryItems: [Trellis.QueryItem]) async throws -> Data {
                    var __request = self._serviceCore.request(\#(method), path: "/x", query: "", template: "/x")
                    __request.queryItems(_queryItems)
                    #sourceLocation(file: "test.swift", line: 4)
                    return try await self._serviceCore.value(__request, as: Data.self)
                    #sourceLocation()
                }
            }
            """#
        )
    }
}
