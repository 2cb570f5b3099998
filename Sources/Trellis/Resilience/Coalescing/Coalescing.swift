public import HTTPTypes

/// In-flight coalescing: identical buffered `GET` and `HEAD` exchanges that overlap share one
/// request and its response, so a hundred callers asking for the same thing at once cost the
/// server one request. With an ``HTTPCache``, that makes one fetch per cache miss however many
/// callers ask.
///
/// Two exchanges are identical when the requests would go out the same: the same method and
/// URL, the same header fields (but for ``ignoredFields``), the same access token label, the
/// same cache policy and the same body limit. The comparison is made on each hop after every
/// stage that adds to a request (middlewares of both scopes, interceptors, credentials, the
/// access token, default headers, cookies), so calls that carry different credentials never
/// share, whatever added them. Each caller checks the shared response with its own accepted
/// statuses and validations, and goes through its own retries and redirects. The first
/// caller's request is the one sent: when it is cancelled, the others start again. Each caller
/// that joined another's request is a ``ResilienceEvent/coalesced(origin:)``.
///
/// ```swift
/// let client = Client(baseURL: url) {
///     $0.resilience.coalescing = Coalescing(ignoring: [HTTPField.Name("X-Request-ID")!])
/// }
/// ```
public struct Coalescing: Sendable {
    /// Header fields that do not make two calls different: a request ID, a trace header.
    public var ignoredFields: Set<HTTPField.Name>

    /// Coalescing that tells calls apart by every header field but `ignoredFields`.
    public init(ignoring ignoredFields: Set<HTTPField.Name> = []) {
        self.ignoredFields = ignoredFields
    }
}
