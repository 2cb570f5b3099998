import NIOCore

/// The limits a ``Transport`` holds one exchange to, decided by the client for each attempt
/// of a call (its redirects and token replays share them).
///
/// - The response head must arrive by ``deadline``.
/// - A buffered exchange (``bufferLimit`` set) returns its whole body in memory by
///   ``deadline``, failing with ``TrellisError/responseTooLarge(_:)`` past the limit.
/// - A streamed body fails when no byte arrives for ``idleTimeout`` while it is read.
///
/// Time running out fails with ``TrellisError/timedOut(_:)`` naming ``timeout``.
/// ``enforce(for:_:)`` holds any exchange to all of these.
public struct ExchangeLimits: Sendable {
    /// The time the attempt may take, which ``deadline`` was fixed from; errors name it.
    public var timeout: Duration
    /// The longest a streamed body may go without a byte while someone reads it.
    public var idleTimeout: Duration
    /// For a buffered exchange, the most bytes the body may hold; `nil` for a streamed one.
    public var bufferLimit: Int?
    /// When the response head, and a buffered exchange's whole body, must have arrived.
    public var deadline: ContinuousClock.Instant
    /// For the first attempt of a hedged call, how a hedge that answers first calls the
    /// attempt off; `nil` otherwise. AsyncHTTPClient's buffered exchanges cancel their request
    /// through ``withCancellationHandler(_:onCancel:)``; any other exchange of such an attempt
    /// runs in a task of its own (``AttemptCancellation/run(_:)``).
    var cancellation: AttemptCancellation?

    /// Limits with `timeout` from now.
    public init(timeout: Duration, idleTimeout: Duration, bufferLimit: Int? = nil) {
        self.timeout = timeout
        self.idleTimeout = idleTimeout
        self.bufferLimit = bufferLimit
        self.deadline = .now + timeout
    }

    /// Limits from a client's timeouts, the request timeout from now.
    init(timeouts: Client.Configuration.Timeouts, timeout: Duration? = nil, bufferLimit: Int?) {
        self.init(timeout: timeout ?? timeouts.request, idleTimeout: timeouts.idle, bufferLimit: bufferLimit)
    }

    /// The deadline on SwiftNIO's clock.
    var nioDeadline: NIODeadline {
        .now() + TimeAmount(deadline - .now)
    }

    /// The failure when the deadline passes.
    func timedOut(_ request: Request) -> TrellisError {
        .timedOut(TimeoutFailure(timeout: timeout, request: RequestLog.summary(request)))
    }

    /// The response of `exchange`, held to these limits: its head by the deadline; then a
    /// buffered exchange's body read into memory within ``bufferLimit`` by the deadline, or a
    /// streamed body watched for the idle timeout. Expiry cancels the exchange, which is what
    /// makes a transport close its connection.
    ///
    /// For a transport that does not hold an exchange to the limits itself.
    public func enforce(
        for request: Request,
        _ exchange: @escaping @Sendable () async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        guard let bufferLimit else {
            let response = try await Deadline.run(until: self, describing: request, exchange)
            return watchingIdleTime(response, of: request)
        }
        return try await Deadline.run(until: self, describing: request) {
            let response = try await exchange()
            return response.withBody(ResponseBody(try await Self.collect(response.body, upTo: bufferLimit)))
        }
    }

    /// `response` with its body, when streamed, ended by ``TrellisError/timedOut(_:)`` once no
    /// byte has come for the idle timeout while someone waits for one.
    public func watchingIdleTime(_ response: Response<ResponseBody>, of request: Request) -> Response<ResponseBody> {
        guard bufferLimit == nil, case .stream = response.body.storage else { return response }
        return response.withBody(IdleTimeout.watching(response.body, for: idleTimeout, of: request))
    }

    /// The body in memory. A connection that breaks now had sent part of a response: it is
    /// not the stale connection a replay is for.
    static func collect(_ body: ResponseBody, upTo limit: Int) async throws -> ByteBuffer {
        do {
            return try await body.collect(upTo: limit)
        } catch TrellisError.connectionFailed(let failure) where failure.mayBeStaleConnection {
            throw TrellisError.connectionFailed(failure.afterPartOfAResponse)
        }
    }
}
