import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The buffered exchanges that go through AsyncHTTPClient's delegate API.
extension AsyncHTTPClientTransport {
    /// A buffered call with no request body or one in memory, over the delegate API: one
    /// resumption of the caller when the whole response is in, where the async API's body
    /// needs a task of its own to be held to the deadline, and a second resumption whenever the
    /// body comes after the head.
    ///
    /// The delegate resumes the caller itself, on the event loop, when the exchange ends;
    /// waiting on the task's future instead would send one more job to that loop on every
    /// call. What it buys: 2% more sequential GETs per second, without which they fell 3.1%
    /// behind 15ed947 (A/B of 2026-11-26, `Benchmarks/README.md`). AsyncHTTPClient tells the
    /// delegate how every exchange ends, except when its client is shutting down, and on a
    /// redirect it follows itself, which only a client Trellis does not own can do: then the
    /// task's result ends the wait as well.
    func sendBuffered(
        _ request: Request,
        upTo limit: Int,
        within limits: ExchangeLimits,
        through route: Route,
        preferring preferred: (any EventLoop)?
    ) async throws -> Response<ResponseBody> {
        let timeout = limits.timeout
        let deadline = limits.deadline
        let host = request.head.authority ?? ""
        let (client, pins) = (route.client, route.pins)
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headerFields.count)
        request.forEachWireField { name, value in headers.add(name: name, value: value) }
        var outgoing: HTTPClient.Request
        do {
            outgoing = try preparedRequests.request(for: request, headers: headers)
            if let bytes = request.body?.bytes { outgoing.body = .byteBuffer(bytes) }
        } catch {
            throw TransportErrors.translate(error, host: host, timeout: timeout, request: request, pins: pins)
        }
        // A fresh delegate for each round; the last one tells whether part of a response came.
        var delegate: BufferingDelegate?
        do {
            while true {
                let started = ContinuousClock.now
                let attempt = BufferingDelegate(limit: limit)
                delegate = attempt
                let task = client.execute(request: outgoing, delegate: attempt, eventLoop: preferred.map { .delegate(on: $0) } ?? .indifferent)
                attempt.hold(to: deadlines.watch(task, until: .now() + TimeAmount(deadline - started)), of: deadlines)
                // Read after `execute`: a shutdown that began in time to fail this request had
                // set the flag before it began.
                if !ownsClient || isShuttingDown.load(ordering: .sequentiallyConsistent) {
                    // A success has ended the wait already: the delegate ends it as it finishes.
                    task.futureResult.whenFailure { attempt.end(.failure($0)) }
                }
                do {
                    let (head, body) = try await limits.withCancellationHandler {
                        try await attempt.response()
                    } onCancel: {
                        task.cancel()
                    }
                    return Response(head: Self.responseHead(status: head.status, headers: head.headers), body: ResponseBody(body))
                } catch {
                    try await Self.waitForAConnection(after: error, inRoundStartedAt: started, until: deadline)
                }
            }
        } catch {
            var translated = TransportErrors.translate(error, host: host, timeout: timeout, request: request, pins: pins)
            if let status = delegate?.receivedStatus, case TrellisError.connectionFailed(let answered) = translated {
                var failure = answered.afterPartOfAResponse
                if request.body != nil { failure = Self.answeredDuringUpload(failure, status: status) }
                translated = TrellisError.connectionFailed(failure)
            }
            throw translated
        }
    }
}

/// Gathers a response into memory on the event loop, refusing more than `limit` bytes, and
/// hands the outcome to the call waiting in ``response()``.
private final class BufferingDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    // Touched only on the request's event loop, where AsyncHTTPClient calls a delegate, except
    // `receivedStatus`, read after the exchange has ended (the end is handed over under
    // `outcome`'s lock), and `outcome` itself.
    typealias Exchange = (HTTPResponseHead, ByteBuffer)

    typealias Deadlines = DeadlineTimer<HTTPClient.Task<Void>>

    /// The exchange's end, the call waiting for it, and the watch on its deadline.
    private struct Outcome {
        var ended = false
        /// The end, until the call asks for it.
        var result: Result<Exchange, any Error>?
        var waiting: UnsafeContinuation<Exchange, any Error>?
        var deadline: (token: Deadlines.Token, timer: Deadlines)?
    }

    private var limit: BodyLimit
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()
    private let outcome = NIOLockedValueBox(Outcome())
    /// The status of the response head, once one has come.
    var receivedStatus: HTTPResponseStatus? { head?.status }

    init(limit: Int) {
        self.limit = BodyLimit(limit)
    }

    /// The response once the exchange has ended, or its error. Called once.
    func response() async throws -> Exchange {
        try await withUnsafeThrowingContinuation { continuation in
            let result = outcome.withLockedValue { state -> Result<Exchange, any Error>? in
                guard let result = state.result else {
                    state.waiting = continuation
                    return nil
                }
                state.result = nil
                return result
            }
            if let result { continuation.resume(with: result) }
        }
    }

    /// Keeps the watch on the exchange's deadline, to be ended when the exchange ends.
    ///
    /// The deadline is the transport's rather than AsyncHTTPClient's (its `deadline:`), which
    /// sets a timer of its own for each request and cancels it from a callback registered on
    /// the task's future from off the event loop: one more job for the loop on every call.
    func hold(to token: Deadlines.Token, of timer: Deadlines) {
        let ended = outcome.withLockedValue { state in
            if !state.ended { state.deadline = (token, timer) }
            return state.ended
        }
        if ended { timer.unwatch(token) }
    }

    /// Ends the exchange with `result`: the first end counts, a later one is dropped.
    func end(_ result: Result<Exchange, any Error>) {
        let (waiting, deadline) = outcome.withLockedValue { state -> (UnsafeContinuation<Exchange, any Error>?, (token: Deadlines.Token, timer: Deadlines)?) in
            guard !state.ended else { return (nil, nil) }
            state.ended = true
            defer { state.waiting = nil; state.deadline = nil }
            if state.waiting == nil { state.result = result }
            return (state.waiting, state.deadline)
        }
        if let deadline { deadline.timer.unwatch(deadline.token) }
        waiting?.resume(with: result)
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.head = head
        do {
            try limit.announce(head.headers.first(name: "content-length").flatMap { Int64($0) })
        } catch {
            return task.eventLoop.makeFailedFuture(error)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        do {
            try limit.add(buffer.readableBytes)
        } catch {
            return task.eventLoop.makeFailedFuture(error)
        }
        if body.readableBytes == 0 {
            body = buffer
        } else {
            var part = buffer
            body.writeBuffer(&part)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        end(.failure(error))
    }

    /// The exchange goes to the caller through ``end(_:)`` alone: the task's own result is
    /// `Void`, so that AsyncHTTPClient does not keep a second copy of the response in the
    /// task's future.
    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        guard let head else {
            end(.failure(HTTPClientError.remoteConnectionClosed))
            throw HTTPClientError.remoteConnectionClosed
        }
        end(.success((head, body)))
    }
}
