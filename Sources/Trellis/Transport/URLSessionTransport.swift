import Foundation
import HTTPTypes
import HTTPTypesFoundation
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A ``Transport`` over `URLSession`. The default on Apple platforms.
///
/// It streams response bodies through a session delegate, so it works the same on Linux's
/// FoundationNetworking, which has no `bytes(for:)`. Limits there, measured: no WebSockets,
/// no server-trust evaluation (a self-signed or pinned certificate cannot be accepted), and a
/// lower request rate than ``AsyncHTTPClientTransport``. A request body that is not in memory
/// (a file, a form, a stream) is first written to a temporary file and sent from there, so its
/// upload progress counts that copy rather than the network; and a response body is queued in
/// memory when it arrives faster than it is read.
public final class URLSessionTransport: Transport {
    /// The transport every client uses by default on Apple platforms.
    public static let shared = URLSessionTransport()

    private let session: URLSession
    private let delegate: SessionDelegate
    /// The deadlines of the streamed calls' heads (see `send`).
    private let headDeadlines = DeadlineTimer<Exchange> { $0.headTimedOut() }
    /// The pins this transport checks, if any.
    public let pinning: CertificatePinning?

    /// A transport with its own session made from `configuration`, checking `pinning`.
    ///
    /// On Apple platforms the pins are evaluated in the session's server-trust challenge,
    /// before the request is sent. FoundationNetworking on Linux offers no server-trust
    /// challenge, so there a request to a pinned host fails with
    /// ``TrellisError/pinningFailed(_:)`` rather than go out unchecked: use
    /// ``AsyncHTTPClientTransport`` for pinning on Linux.
    ///
    /// The session's own cookie handling and cache are turned off (in a copy of
    /// `configuration`): the client's ``CookieJar`` and ``HTTPCache`` decide, the same over
    /// both transports.
    public init(configuration: URLSessionConfiguration = .default, pinning: CertificatePinning? = nil) {
        let delegate = SessionDelegate(pinning: pinning)
        self.delegate = delegate
        self.pinning = pinning
        let configuration = (configuration.copy() as? URLSessionConfiguration) ?? configuration
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        // The client's HTTPCache, when it has one, is the only cache.
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    /// URLSession decodes gzip and deflate bodies itself, and cannot be told not to.
    public var decodesContentEncoding: Bool { true }

    /// Sends the request. A buffered call's whole exchange is held to the deadline by
    /// ``ExchangeLimits/enforce(for:_:)``; a streamed call's head is held to it here, and its
    /// body watched for the idle timeout.
    public func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        guard limits.bufferLimit == nil else {
            return try await limits.enforce(for: request) { try await self.exchange(request, within: limits) }
        }
        return limits.watchingIdleTime(try await exchange(request, within: limits), of: request)
    }

    private func exchange(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        guard let url = request.url else {
            throw TrellisError.invalidRequest(InvalidRequest(.url, "\(RequestLog.redactedURL(request)) is not a valid URL"))
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method.rawValue
        request.forEachWireField { name, value in urlRequest.addValue(value, forHTTPHeaderField: name) }
        #if !canImport(Darwin)
        if let pinning, url.scheme?.lowercased() == "https", let host = url.host, pinning.pins(for: host) != nil {
            throw TrellisError.pinningFailed(ConnectionFailure(
                host: request.head.authority ?? host,
                reason: "URLSession on Linux cannot check pins (FoundationNetworking has no server-trust challenge); use AsyncHTTPClientTransport"
            ))
        }
        #endif
        let timeout = limits.timeout
        // FoundationNetworking turns the interval into whole milliseconds for libcurl and traps
        // on a value too large for that: a longer wait than about 11 days is not one anybody
        // means, and the client's own deadline still applies.
        urlRequest.timeoutInterval = min(timeout.inSeconds, 1_000_000)
        let task: URLSessionDataTask
        var spool: String?
        if let body = request.body, body.bytes == nil {
            let path = try await Self.spool(body)
            spool = path
            task = session.uploadTask(with: urlRequest, fromFile: URL(fileURLWithPath: path))
        } else {
            if let bytes = request.body?.bytes {
                urlRequest.httpBody = Data(buffer: bytes, byteTransferStrategy: .noCopy)
            }
            task = session.dataTask(with: urlRequest)
        }
        let exchange = Exchange(task: task, delegateQueue: session.delegateQueue, request: request, limits: limits, spool: spool)
        // A streamed call's head is held to the deadline here: libcurl's timeout waits for the
        // next byte, and a server that sends a header line now and then never lets it fire. (A
        // buffered call's whole exchange is held to it by `send`.)
        let headDeadline = limits.bufferLimit == nil ? limits.nioDeadline : nil
        let headDeadlines = headDeadlines
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                exchange.start(continuation, delegate: delegate)
                if let headDeadline { exchange.holdHead(to: headDeadline, on: headDeadlines) }
            }
        } onCancel: {
            exchange.cancel()
        }
    }

    /// Writes a streamed body to a temporary file for `uploadTask(with:fromFile:)`, which
    /// sends it in constant memory: FoundationNetworking cannot send from an asynchronous
    /// sequence.
    private static func spool(_ body: RequestBody) async throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("trellis-upload-\(UUID().uuidString)").path
        do {
            let file = try await TransferFile.openForWriting(path, keeping: 0)
            var chunks = body.makeChunkIterator()
            var offset: Int64 = 0
            while let chunk = try await chunks.next() {
                try await file.write([chunk], at: offset)
                offset += Int64(chunk.readableBytes)
            }
            return path
        } catch {
            FileIO.remove(path)
            throw error
        }
    }
}

/// One request's state between the session delegate's callbacks and the caller.
private final class Exchange: @unchecked Sendable {
    private struct State {
        var headContinuation: CheckedContinuation<Response<ResponseBody>, any Error>?
        var cancelled = false
        /// Why the server-trust challenge refused the server, which then ends the task as
        /// cancelled.
        var pinMismatch: String?
        /// Body bytes received so far.
        var received = 0
        /// Where a streamed call's head deadline is watched (``holdHead(to:on:)``).
        var headDeadline: (timer: DeadlineTimer<Exchange>, token: DeadlineTimer<Exchange>.Token)?
    }

    let task: URLSessionDataTask
    let request: Request
    let limits: ExchangeLimits
    private let state = NIOLockedValueBox(State())
    private let chunks: AsyncThrowingStream<ByteBuffer, any Error>
    private let chunkSink: AsyncThrowingStream<ByteBuffer, any Error>.Continuation
    private let canceller: TaskCanceller

    /// A spooled request body, removed when the exchange ends.
    let spool: String?

    init(task: URLSessionDataTask, delegateQueue: OperationQueue, request: Request, limits: ExchangeLimits, spool: String?) {
        self.task = task
        self.request = request
        self.limits = limits
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
    func holdHead(to deadline: NIODeadline, on timer: DeadlineTimer<Exchange>) {
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
        if let limit = limits.bufferLimit {
            let total = state.withLockedValue { state in
                state.received += data.count
                return state.received
            }
            // FoundationNetworking queues what it reads for the delegate without bound, and
            // reads on until the cancellation reaches it: what was queued by then is dropped
            // here, at the least cost, so that the queue drains fast.
            guard total - data.count <= limit else { return }
            if total > limit {
                chunkSink.finish(throwing: TrellisError.responseTooLarge(ResponseTooLarge(limit: limit, announcedLength: nil)))
                task.cancel()
                return
            }
        }
        chunkSink.yield(ByteBuffer(data: data))
    }

    func refusedByPins(_ reason: String) {
        state.withLockedValue { $0.pinMismatch = reason }
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

    /// `error` with the URL it carries redacted as logs redact it: FoundationNetworking puts
    /// the whole URL, query and all, in the error's user info, which `dump(error)` and error
    /// reporters print, and an API key in the query would go with it.
    static func scrubbed(_ error: URLError, for request: Request) -> URLError {
        var userInfo = error.userInfo
        // The string form's key, spelled out: its constant is deprecated.
        userInfo.removeValue(forKey: "NSErrorFailingURLStringKey")
        userInfo.removeValue(forKey: NSUnderlyingErrorKey)
        userInfo[NSURLErrorFailingURLErrorKey] = URL(string: RequestLog.redactedURL(request))
        return URLError(error.code, userInfo: userInfo)
    }

    private func translate(_ error: any Error) -> any Error {
        let host = request.head.authority ?? ""
        if let reason = state.withLockedValue({ $0.pinMismatch }) {
            return TrellisError.pinningFailed(ConnectionFailure(host: host, reason: reason, underlying: error))
        }
        guard let reported = error as? URLError else {
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "\(error)"))
        }
        let urlError = Self.scrubbed(reported, for: request)
        switch urlError.code {
        case .cancelled:
            return CancellationError()
        case .timedOut:
            return limits.timedOut(request)
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected,
            .clientCertificateRequired:
            return TrellisError.tlsFailed(ConnectionFailure(host: host, reason: urlError.localizedDescription, underlying: urlError))
        case .cannotFindHost, .dnsLookupFailed:
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "unknown host", underlying: urlError))
        case .cannotConnectToHost:
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "connection refused", underlying: urlError))
        case .networkConnectionLost:
            var failure = ConnectionFailure(host: host, reason: "the connection was lost before the response was complete", underlying: urlError)
            failure.mayBeStaleConnection = true
            return TrellisError.connectionFailed(failure)
        case .unsupportedURL where ["http", "https"].contains(request.head.scheme?.lowercased()):
            // What libcurl did not support is then the answer: an HTTP/0.9 one, or another
            // protocol's.
            return protocolViolation(ConnectionFailure.notHTTP(urlError.localizedDescription), underlying: urlError)
        case .unknown where urlError.localizedDescription.hasPrefix("Too large response headers"):
            return protocolViolation("the response's header fields went past libcurl's limit of 300 KB (\(urlError.localizedDescription))", underlying: urlError)
        case _ where urlError.localizedDescription.hasSuffix("in chunked-encoding"):
            // libcurl's words for a chunked body whose framing is broken ("Illegal or missing
            // hexadecimal sequence in chunked-encoding"): the answer broke HTTP, as
            // AsyncHTTPClient's parser says of the same bytes.
            return protocolViolation(ConnectionFailure.notHTTP(urlError.localizedDescription), underlying: urlError)
        case .unknown where ["SSL", "certificate", "TLS"].contains(where: urlError.localizedDescription.contains):
            // FoundationNetworking reports libcurl's TLS failures (an untrusted certificate, a
            // failed handshake) as an unknown error carrying curl's message.
            return TrellisError.tlsFailed(ConnectionFailure(host: host, reason: urlError.localizedDescription, underlying: urlError))
        default:
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: urlError.localizedDescription, underlying: urlError))
        }
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
private final class TaskCanceller: @unchecked Sendable {
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

/// Routes the session's callbacks to the exchange of each task.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let exchanges = NIOLockedValueBox([Int: Exchange]())
    private let pinning: CertificatePinning?

    init(pinning: CertificatePinning?) {
        self.pinning = pinning
    }

    func register(_ exchange: Exchange) {
        exchanges.withLockedValue { $0[exchange.task.taskIdentifier] = exchange }
    }

    private func exchange(for task: URLSessionTask) -> Exchange? {
        exchanges.withLockedValue { $0[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        exchange(for: dataTask)?.received(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchange(for: dataTask)?.received(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let exchange = exchanges.withLockedValue { $0.removeValue(forKey: task.taskIdentifier) }
        exchange?.completed(with: error)
    }

    /// The client follows redirects itself (``RedirectPolicy``), so the 3xx response is
    /// delivered as it is.
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    /// Trellis does its own authentication, so a 401 must reach the caller as a response.
    ///
    /// On Apple platforms default handling does that. FoundationNetworking never proceeds
    /// from default handling without a stored credential (the 401 stays pending forever) and
    /// cancels the task for any other answer; there the challenge's failure response is
    /// delivered as the response (its body is lost), then the task is cancelled.
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(Darwin)
        let space = challenge.protectionSpace
        if space.authenticationMethod == NSURLAuthenticationMethodServerTrust, let trust = space.serverTrust,
            let pins = pinning?.pins(for: space.host)
        {
            if let reason = ServerTrustPinning.mismatch(of: trust, pins: pins) {
                exchange(for: task)?.refusedByPins(reason)
                completionHandler(.cancelAuthenticationChallenge, nil)
            } else {
                completionHandler(.useCredential, URLCredential(trust: trust))
            }
            return
        }
        completionHandler(.performDefaultHandling, nil)
        #else
        if let response = challenge.failureResponse, let exchange = exchange(for: task) {
            exchange.received(response)
            exchange.finishBody()
        }
        completionHandler(.cancelAuthenticationChallenge, nil)
        #endif
    }
}

extension URLSessionTransport {
    /// What makes the length of a response's body unknowable, if anything.
    ///
    /// FoundationNetworking's libcurl reads on where RFC 9112 (section 6.3) has a client stop:
    /// it takes one of two differing `Content-Length` values, waits until the timeout for a
    /// body of a length no integer holds, and lets `Transfer-Encoding` win over a
    /// `Content-Length` beside it, which is how a response is smuggled past a proxy. SwiftNIO's
    /// parser refuses all three, so the transports agree.
    static func framingFault(of head: HTTPResponse) -> String? {
        guard let length = head.headerFields[.contentLength] else { return nil }
        if head.headerFields[.transferEncoding] != nil {
            return "it has both Content-Length and Transfer-Encoding"
        }
        // A list of one value repeated is one length (RFC 9110, section 8.6).
        let values = length.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let value = values.first, values.allSatisfy({ $0 == value }), !value.isEmpty, value.allSatisfy(\.isASCIIDigit),
            Int64(value) != nil
        else {
            return "Content-Length \"\(length)\" is not one length"
        }
        return nil
    }
}
