import Foundation
import HTTPTypes
import HTTPTypesFoundation
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request's state between the session delegate's callbacks and the caller.
final class URLSessionExchange: @unchecked Sendable {
    private struct State {
        var headContinuation: CheckedContinuation<Response<ResponseBody>, any Error>?
        var cancelled = false
        /// Why a challenge refused the exchange, which then ends the task as cancelled.
        var refusal: Refusal?
        /// A buffered call's body, counted against its limit as it arrives.
        var bodyLimit: BodyLimit?
        /// Where a streamed call's head deadline is watched (``holdHead(to:on:)``).
        var headDeadline: (timer: DeadlineTimer<URLSessionExchange>, token: DeadlineTimer<URLSessionExchange>.Token)?
    }

    let task: URLSessionDataTask
    let request: Request
    let limits: ExchangeLimits
    private let state: NIOLockedValueBox<State>
    private let chunks: AsyncThrowingStream<ByteBuffer, any Error>
    private let chunkSink: AsyncThrowingStream<ByteBuffer, any Error>.Continuation
    private let canceller: TaskCanceller

    /// A spooled request body, removed when the exchange ends.
    let spool: String?

    init(task: URLSessionDataTask, delegateQueue: OperationQueue, request: Request, limits: ExchangeLimits, spool: String?) {
        self.task = task
        self.request = request
        self.limits = limits
        self.state = NIOLockedValueBox(State(bodyLimit: limits.bufferLimit.map(BodyLimit.init)))
        self.spool = spool
        let canceller = TaskCanceller(task: task, delegateQueue: delegateQueue)
        self.canceller = canceller
        (chunks, chunkSink) = AsyncThrowingStream.makeStream(of: ByteBuffer.self, throwing: (any Error).self)
        chunkSink.onTermination = { termination in
            if case .cancelled = termination { canceller.cancel() }
        }
    }

    func start(_ continuation: CheckedContinuation<Response<ResponseBody>, any Error>, delegate: SessionDelegate) {
        let proceed = state.withLockedValue { state -> Bool in
            guard !state.cancelled else { return false }
            state.headContinuation = continuation
            return true
        }
        guard proceed else {
            spool.map(FileIO.remove)
            continuation.resume(throwing: CancellationError())
            return
        }
        delegate.register(self)
        task.resume()
    }

    func cancel() {
        state.withLockedValue { $0.cancelled = true }
        let continuation = takeHeadContinuation()
        canceller.cancel()
        continuation?.resume(throwing: CancellationError())
    }

    /// The caller waiting for the head, at most once: whoever takes it (the head, the end,
    /// a cancellation, the head's deadline) resumes it. The head's deadline stops being
    /// watched then.
    private func takeHeadContinuation() -> CheckedContinuation<Response<ResponseBody>, any Error>? {
        let (continuation, deadline) = state.withLockedValue { state in
            defer {
                state.headContinuation = nil
                state.headDeadline = nil
            }
            return (state.headContinuation, state.headDeadline)
        }
        if let deadline { deadline.timer.unwatch(deadline.token) }
        return continuation
    }

    /// Holds the wait for the response head to `deadline`, watched by `timer`; nothing when
    /// the wait has ended already.
    func holdHead(to deadline: NIODeadline, on timer: DeadlineTimer<URLSessionExchange>) {
        let token = timer.watch(self, until: deadline)
        let waiting = state.withLockedValue { state in
            if state.headContinuation != nil { state.headDeadline = (timer, token) }
            return state.headContinuation != nil
        }
        if !waiting { timer.unwatch(token) }
    }

    /// The head's deadline passed: fails the exchange with ``TrellisError/timedOut(_:)`` and
    /// cancels its task, if the head has not come.
    func headTimedOut() {
        guard let continuation = takeHeadContinuation() else { return }
        canceller.cancel()
        continuation.resume(throwing: limits.timedOut(request))
    }

    func received(_ response: URLResponse) {
        guard let continuation = takeHeadContinuation() else { return }
        guard let httpResponse = response as? HTTPURLResponse, var head = httpResponse.httpResponse else {
            continuation.resume(throwing: protocolViolation("the response is not an HTTP response"))
            return
        }
        if let fault = URLSessionTransport.framingFault(of: head) {
            task.cancel()
            continuation.resume(throwing: protocolViolation(ConnectionFailure.notHTTP(fault)))
            return
        }
        if head.status.kind == .informational {
            // An answer may send 1xx heads before its final one (`103 Early Hints`). The session
            // on Apple platforms passes over them; FoundationNetworking on Linux reports the first
            // as the status, with the final answer's body. The two do not belong together, and
            // the final status is not to be had.
            task.cancel()
            continuation.resume(throwing: protocolViolation(
                "the session reported the informational status \(head.status.code) as the answer; the final status was lost"
            ))
            return
        }
        Self.unfoldSetCookies(&head)
        let length = response.expectedContentLength >= 0 ? response.expectedContentLength : nil
        let chunks = self.chunks
        // The session delivers bytes whether or not anyone reads them: once nothing can read
        // them any more (the body was dropped, a limit was hit, the reader stopped), the task is
        // cancelled, so that it neither buffers nor downloads the rest.
        let reader = AbandonedBodyCanceller(canceller)
        let body = ResponseBody(expectedLength: length) {
            var iterator = chunks.makeAsyncIterator()
            return ChunkIterator {
                _ = reader
                // The stream ends quietly when the reading task is cancelled; a cut-off body
                // must not pass for a complete one.
                guard let chunk = try await iterator.next() else {
                    try Task.checkCancellation()
                    return nil
                }
                return chunk
            }
        }
        continuation.resume(returning: Response(head: head, body: body))
    }

    func finishBody() {
        chunkSink.finish()
    }

    func received(_ data: Data) {
        // A buffered call's limit is enforced here, as the bytes arrive, rather than by the
        // reader: FoundationNetworking cannot pause a transfer, and a reader that is slow to be
        // scheduled would let the session buffer (and the server send) far past the limit.
        enum Verdict { case keep, drop, refuse(any Error) }
        let verdict = state.withLockedValue { state -> Verdict in
            guard var limit = state.bodyLimit else { return .keep }
            // FoundationNetworking queues what it reads for the delegate without bound, and
            // reads on until the cancellation reaches it: what was queued by then is dropped
            // here, at the least cost, so that the queue drains fast.
            guard limit.received <= limit.limit else { return .drop }
            defer { state.bodyLimit = limit }
            do {
                try limit.add(data.count)
                return .keep
            } catch {
                return .refuse(error)
            }
        }
        switch verdict {
        case .keep:
            chunkSink.yield(ByteBuffer(data: data))
        case .drop:
            break
        case .refuse(let error):
            chunkSink.finish(throwing: error)
            task.cancel()
        }
    }

    /// Why a challenge (on Apple platforms) refused an exchange.
    enum Refusal: Sendable {
        /// The server does not satisfy the pins.
        case pins(String)
        /// The server's certificate does not lead to an authority the client trusts.
        case trust(String)
        /// The proxy `name` asked for credentials it was not given, or refused them.
        case proxy(name: String, reason: String)
    }

    func refused(_ refusal: Refusal) {
        state.withLockedValue { $0.refusal = refusal }
    }

    func completed(with error: (any Error)?) {
        // Before the body's end is handed over: the reader may drop the body as soon as it has
        // it, and a cancellation from then on must not reach the task.
        canceller.taskCompleted()
        spool.map(FileIO.remove)
        let continuation = takeHeadContinuation()
        if let error {
            let translated = translate(error)
            continuation?.resume(throwing: translated)
            chunkSink.finish(throwing: translated)
        } else {
            continuation?.resume(throwing: TrellisError.connectionFailed(
                ConnectionFailure(host: request.head.authority ?? "", reason: "the request completed without a response")
            ))
            chunkSink.finish()
        }
    }

    private func protocolViolation(_ reason: String, underlying: (any Error)? = nil) -> TrellisError {
        var failure = ConnectionFailure(host: request.head.authority ?? "", reason: reason, underlying: underlying)
        failure.isProtocolViolation = true
        return TrellisError.connectionFailed(failure)
    }

    /// `head` with each `Set-Cookie` field the session folded into one (`HTTPURLResponse`
    /// joins repeated fields with ", ") split into the fields the server sent, so that the
    /// cookie jar reads one cookie per field, as over every other transport.
    static func unfoldSetCookies(_ head: inout HTTPResponse) {
        let folded = head.headerFields[values: .setCookie]
        guard folded.contains(where: { $0.contains(",") }) else { return }
        head.headerFields[.setCookie] = nil
        for value in folded.flatMap(SetCookieParser.unfolded) {
            head.headerFields.append(HTTPField(name: .setCookie, value: value))
        }
    }

    private func translate(_ error: any Error) -> any Error {
        let host = request.head.authority ?? ""
        switch state.withLockedValue({ $0.refusal }) {
        case .pins(let reason)?:
            return TrellisError.pinningFailed(ConnectionFailure(host: host, reason: reason, underlying: error))
        case .trust(let reason)?:
            return TrellisError.tlsFailed(ConnectionFailure(host: host, reason: reason, underlying: error))
        case .proxy(let name, let reason)?:
            return TrellisError.connectionFailed(ConnectionFailure(host: name, reason: reason, underlying: error))
        case nil:
            break
        }
        return TransportErrors.translate(error, host: host, timeout: limits.timeout, request: request)
    }
}

/// Cancels a task when the last reference to its response body goes.
private final class AbandonedBodyCanceller: Sendable {
    private let canceller: TaskCanceller

    init(_ canceller: TaskCanceller) {
        self.canceller = canceller
    }

    deinit {
        canceller.cancel()
    }
}

/// Cancels a task from off the session's delegate queue, and never once the task completed.
///
/// FoundationNetworking traps the process ("Trying to access a behaviour for a task that in
/// not in the registry") when a task is cancelled while its completion is being delivered:
/// `cancel()` finds the task still running and queues its failure, and the session drops the
/// task from its registry before that failure is reported. The delivery runs on the delegate
/// queue, which is serial, and marks the task completed first thing (``taskCompleted()``);
/// a cancellation made there is therefore either queued before the delivery, so that the task
/// fails first, or finds the mark and does nothing. The session's own callbacks, on that
/// queue, cancel the task directly for the same reason.
final class TaskCanceller: @unchecked Sendable {
    private let task: URLSessionTask
    private let delegateQueue: OperationQueue
    private let completed = NIOLockedValueBox(false)

    init(task: URLSessionTask, delegateQueue: OperationQueue) {
        self.task = task
        self.delegateQueue = delegateQueue
    }

    /// Called on the delegate queue as the task's completion is delivered.
    func taskCompleted() {
        completed.withLockedValue { $0 = true }
    }

    func cancel() {
        // Every body that is read to its end comes here when it is dropped: no work then.
        guard !completed.withLockedValue({ $0 }) else { return }
        delegateQueue.addOperation { [self] in
            guard !completed.withLockedValue({ $0 }) else { return }
            task.cancel()
        }
    }
}
