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
                defer { attempt.endWatch() }
                do {
                    let (head, body) = try await withTaskCancellationHandler {
                        try await task.futureResult.get()
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

/// Gathers a response into memory on the event loop, refusing more than `limit` bytes; the
/// task's result is the response.
private final class BufferingDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    // Touched only on the request's event loop, where AsyncHTTPClient calls a delegate, except
    // `receivedStatus`, read once the task's result has come, and `watch`, under its lock.
    typealias Response = (HTTPResponseHead, ByteBuffer)

    typealias Deadlines = DeadlineTimer<HTTPClient.Task<Response>>

    /// The watch on the exchange's deadline, and whether the exchange has ended: the task's
    /// result may come before the watch is handed over.
    private struct Watch {
        var ended = false
        var deadline: (token: Deadlines.Token, timer: Deadlines)?
    }

    private var limit: BodyLimit
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()
    private let watch = NIOLockedValueBox(Watch())
    /// The status of the response head, once one has come.
    var receivedStatus: HTTPResponseStatus? { head?.status }

    init(limit: Int) {
        self.limit = BodyLimit(limit)
    }

    /// Keeps the watch on the exchange's deadline, to be ended when the exchange ends.
    ///
    /// The deadline is the transport's rather than AsyncHTTPClient's (its `deadline:`), which
    /// sets a timer of its own for each request and cancels it from a callback registered on
    /// the task's future from off the event loop: one more job for the loop on every call.
    func hold(to token: Deadlines.Token, of timer: Deadlines) {
        let ended = watch.withLockedValue { state in
            if !state.ended { state.deadline = (token, timer) }
            return state.ended
        }
        if ended { timer.unwatch(token) }
    }

    /// Ends the watch on the deadline, once the task's result has come.
    func endWatch() {
        let deadline = watch.withLockedValue { state in
            state.ended = true
            defer { state.deadline = nil }
            return state.deadline
        }
        if let deadline { deadline.timer.unwatch(deadline.token) }
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.head = head
        do {
            try limit.announce(head.headers.first(name: "content-length").flatMap { Int64($0) })
        } catch {
            return task.eventLoop.makeFailedFuture(error)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
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

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        guard let head else { throw HTTPClientError.remoteConnectionClosed }
        return (head, body)
    }
}
