/// wheel's rich error body: `{ "error": "Your Server Error Message", "domainCode": 42 }`.
///
/// ``HTTPStatusFailure/richError`` reads it from a failed response, and the failure's
/// description names its message.
public struct RichErrorBody: Codable, Sendable, Equatable {
    /// The server's message.
    public var error: String
    /// The server's own error code, when it sends one.
    public var domainCode: Int?

    /// Creates a rich error body.
    public init(error: String, domainCode: Int? = nil) {
        self.error = error
        self.domainCode = domainCode
    }
}
