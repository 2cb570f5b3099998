public import Foundation
public import HTTPTypes
import NIOConcurrencyHelpers

/// What a generated service holds: its client and its own interceptors.
///
/// Generated code calls it; you rarely need it directly, except to reach
/// ``TrellisService/client``.
public final class ServiceContext: Sendable {
    /// The client the service sends through.
    public let client: Client

    private let interceptors = NIOLockedValueBox(InterceptorMiddleware())

    /// Creates the context of a service that sends through `client`.
    public init(client: Client) {
        self.client = client
    }

    var beforeSending: BeforeSending? {
        get { interceptors.withLockedValue { $0.beforeSending } }
        set { interceptors.withLockedValue { $0.beforeSending = newValue } }
    }

    var onResponse: OnResponse? {
        get { interceptors.withLockedValue { $0.onResponse } }
        set { interceptors.withLockedValue { $0.onResponse = newValue } }
    }

    /// The service's interceptors as middlewares for one call; none when neither is set.
    private var serviceMiddlewares: [any Middleware] {
        let current = interceptors.withLockedValue { $0 }
        guard current.beforeSending != nil || current.onResponse != nil else { return [] }
        var middleware = current
        middleware.maximumBodySize = client.maximumBodySize
        return [middleware]
    }

    /// Starts a request to an endpoint of this service.
    public func request(
        _ method: HTTPRequest.Method,
        path: String,
        query: String = "",
        template: String
    ) -> RequestBuilder {
        RequestBuilder(method: method, path: path, query: query, template: template, encoder: client.encoder)
    }

    /// Sends the request and decodes its body.
    public func value<Value: Decodable>(_ builder: RequestBuilder, as type: Value.Type) async throws -> Value {
        try await client.value(for: builder.makeRequest(for: client), as: type, middlewares: serviceMiddlewares)
    }

    /// Sends the request and returns status, headers and decoded body.
    public func response<Value: Decodable>(_ builder: RequestBuilder, as type: Value.Type) async throws -> Response<Value> {
        try await client.response(for: builder.makeRequest(for: client), as: type, middlewares: serviceMiddlewares)
    }

    /// Sends the request and returns status and headers.
    public func response(_ builder: RequestBuilder) async throws -> Response<Void> {
        try await client.response(for: builder.makeRequest(for: client), middlewares: serviceMiddlewares)
    }

    /// Sends the request for its effect.
    public func perform(_ builder: RequestBuilder) async throws {
        try await client.perform(builder.makeRequest(for: client), middlewares: serviceMiddlewares)
    }
}

/// What every `@Service`-generated class is: a `Sendable` reference to a client with
/// per-service interceptors.
public protocol TrellisService: AnyObject, Sendable {
    /// The service's client and interceptors.
    var serviceContext: ServiceContext { get }

    /// A service that sends through `client`.
    init(client: Client)
}

extension TrellisService {
    /// A service for `baseUrl`, in Snowdrop's spelling, so that Snowdrop code moves over by
    /// changing its import.
    public init(baseUrl: URL) {
        self.init(client: Client(baseURL: baseUrl))
    }

    /// The client this service sends through.
    public var client: Client { serviceContext.client }

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
        get { serviceContext.beforeSending }
        set { serviceContext.beforeSending = newValue }
    }

    /// Inspects or replaces each response of this service, with its body in memory, before it
    /// is validated and decoded.
    public var onResponse: OnResponse? {
        get { serviceContext.onResponse }
        set { serviceContext.onResponse = newValue }
    }
}
