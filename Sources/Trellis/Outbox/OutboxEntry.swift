public import Foundation
public import HTTPTypes

/// A call held by an ``Outbox``: what it sends, under which key, in which lane, and how its
/// delivery has gone so far.
public struct OutboxEntry: Sendable {
    /// The entry's number in its storage, given when it is stored; entries of a lane are
    /// delivered in its order.
    public let id: Int64
    /// The lane the call is delivered in: in order after the lane's earlier calls, beside the
    /// other lanes.
    public let lane: String
    /// The call's method.
    public let method: HTTPRequest.Method
    /// The absolute URL.
    public let url: String
    /// The call's header fields, as it was enqueued (its key apart, which each delivery adds).
    public let headerFields: HTTPFields
    /// The call's body.
    public let body: Data?
    /// The key every delivery of the call sends (``IdempotencyKey-swift.struct``).
    public let idempotencyKey: String
    /// When ``Outbox/enqueue(_:lane:)`` stored it.
    public let enqueuedAt: Date
    /// How many deliveries were made and failed.
    public var attempts: Int
    /// How the last delivery failed, or why the call is a dead letter.
    public var lastFailure: String?
    /// For a dead letter refused by the server: its final answer, body included.
    public var finalAnswer: Response<Data>?

    /// An entry; a storage makes them, and tests of a storage of your own.
    public init(
        id: Int64,
        lane: String,
        method: HTTPRequest.Method,
        url: String,
        headerFields: HTTPFields,
        body: Data?,
        idempotencyKey: String,
        enqueuedAt: Date,
        attempts: Int = 0,
        lastFailure: String? = nil,
        finalAnswer: Response<Data>? = nil
    ) {
        self.id = id
        self.lane = lane
        self.method = method
        self.url = url
        self.headerFields = headerFields
        self.body = body
        self.idempotencyKey = idempotencyKey
        self.enqueuedAt = enqueuedAt
        self.attempts = attempts
        self.lastFailure = lastFailure
        self.finalAnswer = finalAnswer
    }
}

/// How a call handed to an ``Outbox`` ended.
public enum OutboxOutcome: Sendable {
    /// The server answered with a status that ends the call (2xx, or 3xx that was not followed).
    case delivered(id: Int64, status: HTTPResponse.Status)
    /// The call will not be sent again: a final refusal, too many attempts, or too old; it is
    /// kept in ``Outbox/deadLetters()`` with the reason.
    case deadLettered(OutboxEntry)
}
