public import Foundation
public import HTTPTypes

/// wheel's endpoint value: a type, usually an enum, that configures each request.
///
/// ```swift
/// enum YourRequestConfig: ConfigRequestConvertible {
///     case useCaseOne
///     case useCaseTwo
///
///     var baseURL: URL { URL(string: "https://api.example.com")! }
///     var path: String {
///         switch self {
///         case .useCaseOne: "useCaseOnePath"
///         case .useCaseTwo: "useCaseTwoPath"
///         }
///     }
///     var method: HTTPRequest.Method {       // wheel: HTTPMethod, .GET
///         switch self {
///         case .useCaseOne: .get
///         case .useCaseTwo: .post
///         }
///     }
///     var parameters: [String: Any] { [:] }
///     var headers: [String: String]? { [:] }
/// }
///
/// let user: User = try await client.request(authenticated: true, requestConfig: YourRequestConfig.useCaseOne)
/// ```
///
/// The parameters go where an ``EndpointType``'s go: the query of a `GET`, `HEAD` or `DELETE`,
/// a form body otherwise.
public protocol ConfigRequestConvertible: Sendable {
    /// The URL the path is appended to.
    var baseURL: URL { get }
    /// The path under ``baseURL``.
    var path: String { get }
    /// The method; `GET` unless given.
    var method: HTTPRequest.Method { get }
    /// The parameters: a `GET`'s query, another method's form body; none unless given.
    var parameters: [String: Any] { get }
    /// Header fields of this request; none unless given.
    var headers: [String: String]? { get }
}

extension ConfigRequestConvertible {
    /// `GET`.
    public var method: HTTPRequest.Method { .get }
    /// No parameters.
    public var parameters: [String: Any] { [:] }
    /// No header fields.
    public var headers: [String: String]? { nil }
}

extension Request {
    /// The request a wheel configuration describes.
    ///
    /// - Parameters:
    ///   - requestConfig: the configuration: base URL, path, method, parameters, headers.
    ///   - authenticated: whether it carries the access token stored under the default
    ///     label, refreshed on 401 by the client's ``TokenRefresher`` as any token is.
    public init(requestConfig: some ConfigRequestConvertible, authenticated: Bool = false) throws {
        try self.init(
            baseURL: requestConfig.baseURL.absoluteString,
            path: requestConfig.path,
            method: requestConfig.method,
            parameters: requestConfig.parameters,
            headers: requestConfig.headers ?? [:]
        )
        if authenticated { requireAccessToken() }
    }
}

extension Client {
    /// wheel's `request(authenticated:requestConfig:)`: sends the configured request and
    /// decodes its body.
    public func request<Value: Decodable>(authenticated: Bool, requestConfig: some ConfigRequestConvertible) async throws -> Value {
        try await value(for: Request(requestConfig: requestConfig, authenticated: authenticated), as: Value.self)
    }

    /// wheel's `request(authenticated:requestConfig:)` without a result.
    public func request(authenticated: Bool, requestConfig: some ConfigRequestConvertible) async throws {
        try await perform(Request(requestConfig: requestConfig, authenticated: authenticated))
    }
}
