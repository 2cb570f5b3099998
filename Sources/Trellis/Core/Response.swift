public import HTTPTypes

/// A response: its status, its header fields and a body of type `Body`.
///
/// The client pipeline passes `Response<ResponseBody>` (a streaming body) from the transport
/// up through the middlewares; a service method declared as returning `Response<Post>` gets the
/// status and headers together with the decoded body, and `Response<Void>` gets them alone.
public struct Response<Body> {
    /// Status code, reason phrase and header fields.
    public var head: HTTPResponse
    /// The body.
    public var body: Body
    /// The idempotency key the call sent, set on the way back by ``IdempotencyKeyStage`` so
    /// that the call's error can name it.
    var sentIdempotencyKey: String?

    /// Creates a response from its head and body.
    public init(head: HTTPResponse, body: Body) {
        self.head = head
        self.body = body
    }

    /// The status.
    public var status: HTTPResponse.Status {
        get { head.status }
        set { head.status = newValue }
    }

    /// The header fields.
    public var headerFields: HTTPFields {
        get { head.headerFields }
        set { head.headerFields = newValue }
    }

    /// The same head with another body.
    public func withBody<Other>(_ body: Other) -> Response<Other> {
        var response = Response<Other>(head: head, body: body)
        response.sentIdempotencyKey = sentIdempotencyKey
        return response
    }
}

extension Response: Sendable where Body: Sendable {}

extension Response where Body == Void {
    /// Creates a body-less response.
    public init(head: HTTPResponse) {
        self.init(head: head, body: ())
    }
}
