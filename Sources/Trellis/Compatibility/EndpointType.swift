import Foundation
public import HTTPTypes

/// An endpoint declared as a value rather than a `@Service` method: Yggdrasil's
/// `EndpointType`, and the shape Moya's `TargetType` users write, often an enum with a case per
/// endpoint. ``Request/init(endpoint:)`` turns one into a ``Request`` that crosses the same
/// pipeline as any other call.
///
/// ```swift
/// enum BaconIpsumEndpoints: EndpointType {
///     case meatAndFiller
///     case allMeat
///
///     var baseUrl: String { "https://baconipsum.com" }
///     var path: String { "/api/" }
///     var parameters: [String: Any] {
///         switch self {
///         case .meatAndFiller: ["type": "meat-and-filler"]
///         case .allMeat: ["type": "all-meat", "paras": "2", "start-with-lorem": "1"]
///         }
///     }
/// }
///
/// let text = try await client.value(for: BaconIpsumEndpoints.allMeat, as: [String].self)
/// ```
public protocol EndpointType: Sendable {
    /// The absolute URL the path is relative to: `https://api.example.com/v1`.
    var baseUrl: String { get }
    /// The path after the base URL: `/posts`. Sent as written (percent-encode it yourself).
    var path: String { get }
    /// `GET` unless given.
    var method: HTTPRequest.Method { get }
    /// Sent as the query of a `GET`, `HEAD` or `DELETE`, and as an
    /// `application/x-www-form-urlencoded` body otherwise, in the order of their names. A value
    /// is sent as its ``ParameterValue`` text, an array as the name repeated, anything else as
    /// its description.
    var parameters: [String: Any] { get }
    /// Header fields of the endpoint's requests.
    var headers: [String: String] { get }
}

extension EndpointType {
    public var method: HTTPRequest.Method { .get }
    public var parameters: [String: Any] { [:] }
    public var headers: [String: String] { [:] }
}

/// An endpoint made on the spot, without a type of its own (Yggdrasil's `Endpoint`, also
/// called `NetworkEndpoint` in its README).
///
/// ```swift
/// let endpoint = Endpoint(baseUrl: "https://baconipsum.com", path: "/api", parameters: ["type": "meat-and-filler"])
/// ```
public struct Endpoint: EndpointType {
    public var baseUrl: String
    public var path: String
    public var method: HTTPRequest.Method
    /// The parameters, kept `Sendable` so that an endpoint can cross tasks.
    public var sendableParameters: [String: any Sendable]
    public var headers: [String: String]

    public var parameters: [String: Any] { sendableParameters }

    /// An endpoint at `path` under `baseUrl`, sent with `method` (`GET` by default), its
    /// `parameters` (the query of a `GET`, `HEAD` or `DELETE`, a form body otherwise) and
    /// `headers`.
    public init(
        baseUrl: String,
        path: String,
        method: HTTPRequest.Method = .get,
        parameters: [String: any Sendable] = [:],
        headers: [String: String] = [:]
    ) {
        self.baseUrl = baseUrl
        self.path = path
        self.method = method
        self.sendableParameters = parameters
        self.headers = headers
    }
}

/// Yggdrasil's README names the convenience struct both ways.
public typealias NetworkEndpoint = Endpoint
