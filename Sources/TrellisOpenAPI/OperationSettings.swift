public import Trellis

/// What Trellis does for one OpenAPI operation beyond the client's defaults: whether it carries
/// the access token, how it is retried, its timeout, and whether its response is a stream.
///
/// Generated code stays untouched: settings are given to ``TrellisClientTransport`` by
/// operation ID, the `operationId` of the OpenAPI document.
///
/// ```swift
/// let transport = TrellisClientTransport(client: client, operations: [
///     "getOwner": .requiringAccessToken(),
///     "getInventory": OperationSettings(retryPolicy: .standard),
///     "downloadPhoto": OperationSettings(streamsResponse: true),
/// ])
/// ```
public struct OperationSettings: Sendable {
    /// The access token the operation carries, refreshed when the server refuses it; `nil`
    /// sends it without one.
    public var accessToken: AccessTokenRequirement?
    /// How the operation is retried; `nil` uses the client's ``Client/retryPolicy``.
    ///
    /// A policy retries POST and PATCH only with `retriesNonIdempotentMethods`, and never a
    /// request whose body was a one-shot stream.
    public var retryPolicy: RetryPolicy?
    /// The time the operation may take, body included unless it ``streamsResponse``; `nil`
    /// uses the client's ``Client/timeout``.
    public var timeout: Duration?
    /// Whether the response body is a stream for the caller to read as it arrives (a
    /// download, an event stream), exempt from the client's ``Client/maximumBodySize``; its
    /// timeout then covers the wait for the response head, and the client's idle timeout each
    /// wait for more of the body.
    ///
    /// Generated clients read JSON and text bodies into memory with no limit of their own, so
    /// by default every response body is read whole by Trellis first, held to the client's
    /// limit (failing with ``TrellisError/responseTooLarge(_:)`` past it) and to its timeout.
    public var streamsResponse: Bool

    /// Settings; the defaults add nothing to the client's.
    public init(
        accessToken: AccessTokenRequirement? = nil,
        retryPolicy: RetryPolicy? = nil,
        timeout: Duration? = nil,
        streamsResponse: Bool = false
    ) {
        self.accessToken = accessToken
        self.retryPolicy = retryPolicy
        self.timeout = timeout
        self.streamsResponse = streamsResponse
    }

    /// The client's defaults.
    public static let `default` = OperationSettings()

    /// An operation that carries the access token stored under `label`.
    public static func requiringAccessToken(label: String = AccessTokenRequirement.defaultLabel) -> OperationSettings {
        OperationSettings(accessToken: AccessTokenRequirement(label: label))
    }
}
