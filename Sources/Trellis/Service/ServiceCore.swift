import Foundation
public import HTTPTypes
import NIOConcurrencyHelpers

/// What a generated service holds: its client and its own interceptors.
///
/// Public only because `@Service` expands into code in your module that calls it; the leading
/// underscore keeps it out of code completion and the documentation. Reach the client with
/// ``TrellisService/client``.
public final class _ServiceCore: Sendable {
    /// The client the service sends through.
    public let client: Client
    /// The label the service's access token is stored under (`@TokenLabel`).
    public let tokenLabel: String

    private let interceptors: ServiceInterceptors.Slot
    private let authRetry = NIOLockedValueBox(AuthRetry())

    private struct AuthRetry {
        /// The hook as the user set it, typed for the service, returned by the getter.
        var hook: (any Sendable)?
        var refresh: AccessTokenRequirement.Refresh?
    }

    /// The client the service's calls go through: ``client`` with the service's interceptors
    /// added, sharing its transport and token storage.
    let serviceClient: Client

    /// Creates the context of a service that sends through `client`, with its token stored
    /// under `tokenLabel`.
    public init(client: Client, tokenLabel: String = AccessTokenRequirement.defaultLabel) {
        self.client = client
        self.tokenLabel = tokenLabel
        let interceptors = ServiceInterceptors.Slot(InterceptorMiddleware(maximumBodySize: client.maximumBodySize))
        self.interceptors = interceptors
        self.serviceClient = client.adding(middlewares: [ServiceInterceptors(slot: interceptors)])
    }

    var authRetryHook: (any Sendable)? {
        authRetry.withLockedValue { $0.hook }
    }

    func setAuthRetry(hook: (any Sendable)?, refresh: AccessTokenRequirement.Refresh?) {
        authRetry.withLockedValue { $0 = AuthRetry(hook: hook, refresh: refresh) }
    }

    var beforeSending: BeforeSending? {
        get { interceptors.current.beforeSending }
        set { interceptors.change { $0.beforeSending = newValue } }
    }

    var onResponse: OnResponse? {
        get { interceptors.current.onResponse }
        set { interceptors.change { $0.onResponse = newValue } }
    }

    /// Starts a request to an endpoint of this service.
    public func request(
        _ method: HTTPRequest.Method,
        path: String,
        query: String = "",
        template: String
    ) -> _RequestBuilder {
        _RequestBuilder(method: method, path: path, query: query, template: template, encoder: client.encoder)
    }

    /// The request a builder describes, with the service's token requirement.
    public func makeRequest(_ builder: _RequestBuilder) throws -> Request {
        var request = try builder.makeRequest(for: client)
        if builder.requiresAccessToken {
            request.accessToken = AccessTokenRequirement(label: tokenLabel, refresh: authRetry.withLockedValue { $0.refresh })
        }
        return request
    }

    /// Sends the request and decodes its body.
    public func value<Value: Decodable>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Value {
        try await serviceClient.value(for: makeRequest(builder), as: type)
    }

    /// Sends the request, decodes its body and stores the token it carries under the
    /// service's label: an endpoint that returns a token logs the user in.
    public func value<Value: Decodable & AccessTokenConvertible>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Value {
        let value = try await serviceClient.value(for: makeRequest(builder), as: type)
        try await storeToken(of: value)
        return value
    }

    /// Sends the request and returns status, headers and decoded body.
    public func response<Value: Decodable>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Response<Value> {
        try await serviceClient.response(for: makeRequest(builder), as: type)
    }

    /// Sends the request, returns status, headers and decoded body, and stores the token the
    /// body carries under the service's label.
    public func response<Value: Decodable & AccessTokenConvertible>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Response<Value> {
        let response = try await serviceClient.response(for: makeRequest(builder), as: type)
        try await storeToken(of: response.body)
        return response
    }

    /// Sends the request and makes the value with the type's `parseData(_:)`.
    public func value<Value: Parsable>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Value {
        try await serviceClient.value(for: makeRequest(builder), as: type)
    }

    /// A type both ``Parsable`` and `Decodable` is made by `parseData(_:)`.
    public func value<Value: Decodable & Parsable>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Value {
        try await serviceClient.value(for: makeRequest(builder), as: type)
    }

    /// Sends the request and returns status, headers and the value `parseData(_:)` made.
    public func response<Value: Parsable>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Response<Value> {
        try await serviceClient.response(for: makeRequest(builder), as: type)
    }

    /// A type both ``Parsable`` and `Decodable` is made by `parseData(_:)`.
    public func response<Value: Decodable & Parsable>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Response<Value> {
        try await serviceClient.response(for: makeRequest(builder), as: type)
    }

    /// Sends the request and returns status and headers.
    /// What a return type of any other kind meets: an error at the declaration, naming the
    /// kinds an endpoint returns.
    @available(
        *, unavailable,
        message: "an endpoint returns a Decodable or Parsable value, Response<…> of one, Data, String, Void, a download or an event stream; make this type conform to Decodable or to Parsable"
    )
    public func value<Value>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Value {
        fatalError("unavailable")
    }

    /// The same for `Response<…>`.
    @available(
        *, unavailable,
        message: "Response<…> holds a Decodable or Parsable value, Data, String or Void; make this type conform to Decodable or to Parsable"
    )
    public func response<Value>(_ builder: _RequestBuilder, as type: Value.Type) async throws -> Response<Value> {
        fatalError("unavailable")
    }

    public func response(_ builder: _RequestBuilder) async throws -> Response<Void> {
        try await serviceClient.response(for: makeRequest(builder))
    }

    /// Sends the request for its effect.
    public func perform(_ builder: _RequestBuilder) async throws {
        try await serviceClient.perform(makeRequest(builder))
    }

    /// Streams the response body to a new file in the temporary directory (`@Download`).
    public func download(_ builder: _RequestBuilder) async throws -> DownloadedFile {
        try await serviceClient.download(for: makeRequest(builder))
    }

    /// The download as a task, not started (`@Download` returning ``DownloadTask``).
    public func downloadTask(_ builder: _RequestBuilder) throws -> DownloadTask {
        serviceClient.downloadTask(for: try makeRequest(builder))
    }

    /// Opens the WebSocket the builder describes (`@WebSocket`).
    public func webSocket(_ builder: _RequestBuilder) async throws -> WebSocketConnection {
        try await serviceClient.webSocket(for: makeRequest(builder))
    }

    /// The server-sent events of the request (a function returning
    /// `EventStream<ServerSentEvent>`); nothing is sent until the stream is iterated.
    public func events(_ builder: _RequestBuilder) throws -> EventStream<ServerSentEvent> {
        serviceClient.events(for: try makeRequest(builder))
    }

    /// The data of each `message` event decoded as `type` (a function returning
    /// `EventStream<Value>`).
    public func events<Value: Decodable & Sendable>(_ builder: _RequestBuilder, as type: Value.Type) throws -> EventStream<Value> {
        serviceClient.events(for: try makeRequest(builder), as: type)
    }

    /// The values of a JSON Lines response, each decoded as `type` (a function returning
    /// `JSONLines<Value>`); nothing is sent until the sequence is iterated.
    public func jsonLines<Value: Decodable & Sendable>(_ builder: _RequestBuilder, as type: Value.Type) throws -> JSONLines<Value> {
        serviceClient.jsonLines(for: try makeRequest(builder), as: type)
    }

    private func storeToken(of value: some AccessTokenConvertible) async throws {
        guard let token = value.convert() else { return }
        try await serviceClient.accessTokens.storage.store(token, for: tokenLabel)
    }
}

/// A service's `beforeSending` and `onResponse`, read when each call starts, since they may be
/// set at any time.
private struct ServiceInterceptors: Middleware, Stage {
    let slot: Slot

    /// The interceptors, which may change while calls are under way.
    final class Slot: Sendable {
        private let interceptors: NIOLockedValueBox<InterceptorMiddleware>

        init(_ interceptors: InterceptorMiddleware) {
            self.interceptors = NIOLockedValueBox(interceptors)
        }

        var current: InterceptorMiddleware { interceptors.withLockedValue { $0 } }

        var hasAny: Bool {
            interceptors.withLockedValue { $0.beforeSending != nil || $0.onResponse != nil }
        }

        func change(_ body: (inout InterceptorMiddleware) -> Void) {
            interceptors.withLockedValue { body(&$0) }
        }
    }

    /// Passed over, without a frame, while the service has none.
    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        slot.hasAny
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        try await intercept(request) { request in try await next(request, call) }
    }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        let current = slot.current
        guard current.beforeSending != nil || current.onResponse != nil else { return try await next(request) }
        return try await current.intercept(request, next: next)
    }
}

/// What every `@Service`-generated class is: a `Sendable` reference to a client with
/// per-service interceptors.
public protocol TrellisService: AnyObject, Sendable {
    /// The service's client and interceptors, which `@Service` generates.
    var _serviceCore: _ServiceCore { get }

    /// A service that sends through `client`.
    init(client: Client)
}

extension TrellisService {
    /// The client this service sends through.
    public var client: Client { _serviceCore.client }

    /// Rewrites or rejects each request of this service before it is sent (after the client's
    /// middlewares).
    ///
    /// ```swift
    /// blog.beforeSending = { request in
    ///     var request = request
    ///     try request.setHeader("X-Request-ID", UUID().uuidString)
    ///     return request
    /// }
    /// ```
    public var beforeSending: BeforeSending? {
        get { _serviceCore.beforeSending }
        set { _serviceCore.beforeSending = newValue }
    }

    /// Inspects or replaces each response of this service, with its body in memory, before it
    /// is validated and decoded.
    public var onResponse: OnResponse? {
        get { _serviceCore.onResponse }
        set { _serviceCore.onResponse = newValue }
    }

    /// Obtains a new access token when a `@RequiresAccessToken` call finds none stored, finds
    /// it expired, or has it refused by the server; the client's ``TokenRefresher`` is used when
    /// this is `nil`.
    ///
    /// Trellis runs the hook once however many calls are waiting, stores the token it returns
    /// under ``tokenLabel``, and replays each waiting call once with it. Read the current token
    /// (for its refresh token) with ``accessToken()``.
    ///
    /// ```swift
    /// blog.onAuthRetry = { blog in
    ///     guard let refreshToken = try await blog.accessToken()?.refreshToken else {
    ///         throw TrellisError.authenticationRequired(.init(label: blog.tokenLabel, reason: "log in first"))
    ///     }
    ///     return try await blog.refresh(grant: RefreshGrant(refreshToken: refreshToken))
    /// }
    /// ```
    public var onAuthRetry: (@Sendable (Self) async throws -> any AccessTokenConvertible)? {
        get { _serviceCore.authRetryHook as? @Sendable (Self) async throws -> any AccessTokenConvertible }
        set {
            guard let hook = newValue else {
                _serviceCore.setAuthRetry(hook: nil, refresh: nil)
                return
            }
            // The context keeps the service weakly: the service owns the context.
            _serviceCore.setAuthRetry(hook: hook) { [weak self] _ in
                guard let self else { throw CancellationError() }
                return try await hook(self)
            }
        }
    }

    /// The label this service's access token is stored under.
    public var tokenLabel: String { _serviceCore.tokenLabel }

    /// The access token stored for this service, if any.
    public func accessToken() async throws -> AccessToken? {
        try await client.accessTokens.storage.fetch(for: tokenLabel)
    }

    /// Stores `token` for this service, as a login endpoint does by returning it.
    public func setAccessToken(_ token: AccessToken) async throws {
        try await client.accessTokens.storage.store(token, for: tokenLabel)
    }

    /// Deletes this service's access token: a logout.
    public func deleteAccessToken() async throws {
        try await client.accessTokens.storage.delete(for: tokenLabel)
    }
}
