public import HTTPTypes

/// How a client keys the calls that change things (``IdempotencyKey-swift.struct``): which methods are keyed
/// when the call has no key of its own, the field the key goes in, and how long a call waits
/// for the first request with its key to finish.
///
/// ```swift
/// let client = Client(baseURL: url) {
///     $0.idempotencyKeys = IdempotencyKeySettings()   // every POST and PATCH keyed
///     $0.retry = .standard                            // and retried like a GET
/// }
/// ```
public struct IdempotencyKeySettings: Sendable {
    /// The methods whose calls are keyed when they have no ``Request/idempotencyKey`` of their
    /// own: `POST` and `PATCH` unless you say otherwise. (`PUT` and `DELETE` are idempotent
    /// already.)
    public var methods: Set<HTTPRequest.Method>
    /// The field the key goes in: `Idempotency-Key`, as the draft names it, unless you say
    /// otherwise.
    public var fieldName: HTTPField.Name
    /// Whether the key is sent quoted, as the draft's structured field string
    /// (`Idempotency-Key: "8e03978e-…"`), or bare, as some servers read it (Stripe's). Quoted
    /// unless you say otherwise.
    public var quotesKey: Bool
    /// The longest a call waits, in all, while the server answers `409 Conflict` (the first
    /// request with the key is still in progress) before it sends the call again; past it, the
    /// call ends with that `409`. 30 seconds unless you say otherwise.
    public var inProgressWait: Duration

    /// Settings; by default `POST` and `PATCH` are keyed in `Idempotency-Key`, quoted.
    public init(
        methods: Set<HTTPRequest.Method> = [.post, .patch],
        fieldName: HTTPField.Name = IdempotencyKeySettings.draftFieldName,
        quotesKey: Bool = true,
        inProgressWait: Duration = .seconds(30)
    ) {
        self.methods = methods
        self.fieldName = fieldName
        self.quotesKey = quotesKey
        self.inProgressWait = max(.zero, inProgressWait)
    }

    /// `Idempotency-Key`.
    public static let draftFieldName = HTTPField.Name("Idempotency-Key")!
}
