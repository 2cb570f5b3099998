public import Foundation

/// A request declared as a value around an ``EndpointType`` (Yggdrasil's `RequestType`): the
/// endpoint, and what this request adds to it.
///
/// ```swift
/// struct LoremRequest: RequestType {
///     let endpoint: EndpointType = BaconIpsumEndpoints.meatAndFiller
///     let retryCount = 3
///     let ignoreLocalCache = true
/// }
///
/// let lorem = try await client.value(for: LoremRequest(), as: [String].self)
/// ```
///
/// Yggdrasil's `preconditions` and `responseValidations` are closures returning a
/// `ValidationResult`; here they are ``RequestPrecondition`` and ``ResponseValidation`` values, which
/// throw instead.
public protocol RequestType: Sendable {
    /// The endpoint this request sends.
    var endpoint: any EndpointType { get }
    /// Header fields added to the endpoint's.
    var headers: [String: String] { get }
    /// A body sent as it is, replacing any the endpoint's parameters would make.
    var body: Data? { get }
    /// How many times the request is sent again after the first attempt, with the waits and
    /// statuses of the client's retry policy.
    var retryCount: Int { get }
    /// Whether the request skips the client's ``HTTPCache`` (``CachePolicy/reload``).
    var ignoreLocalCache: Bool { get }
    /// Checks run before the request is sent, after the client's.
    var preconditions: [RequestPrecondition] { get }
    /// Checks run on the response, after the client's.
    var responseValidations: [ResponseValidation] { get }
}

extension RequestType {
    public var headers: [String: String] { [:] }
    public var body: Data? { nil }
    public var retryCount: Int { 0 }
    public var ignoreLocalCache: Bool { false }
    /// No checks of its own.
    public var preconditions: [RequestPrecondition] { [] }
    /// No checks of its own.
    public var responseValidations: [ResponseValidation] { [] }
}

extension Request {
    /// The request a ``RequestType`` value describes.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` as ``init(endpoint:)`` does.
    public init(request: some RequestType) throws {
        try self.init(endpoint: request.endpoint)
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) {
            try setHeader(name, value)
        }
        if let body = request.body { self.body = RequestBody(body) }
        if request.retryCount > 0 { maximumRetries = request.retryCount }
        if request.ignoreLocalCache { cachePolicy = .reload }
        preconditions += request.preconditions
        validations += request.responseValidations
    }
}

extension Client {
    /// Sends the request a ``RequestType`` value describes and decodes its body.
    public func value<Value: Decodable>(for request: some RequestType, as type: Value.Type = Value.self) async throws -> Value {
        try await value(for: Request(request: request), as: type)
    }

    /// Sends the request a ``RequestType`` value describes for its effect.
    public func perform(_ request: some RequestType) async throws {
        try await perform(Request(request: request))
    }
}
