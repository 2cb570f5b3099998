/// An RFC 9457 problem details object (`application/problem+json`).
public struct ProblemDetails: Codable, Sendable, Equatable {
    /// A URI reference that identifies the problem type.
    public var type: String?
    /// A short summary of the problem type.
    public var title: String?
    /// The HTTP status code the server generated for this occurrence.
    public var status: Int?
    /// An explanation specific to this occurrence.
    public var detail: String?
    /// A URI reference that identifies this occurrence.
    public var instance: String?

    /// Creates problem details.
    public init(type: String? = nil, title: String? = nil, status: Int? = nil, detail: String? = nil, instance: String? = nil) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
        self.instance = instance
    }
}
