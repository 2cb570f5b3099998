public import AsyncHTTPClient
import Atomics
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A ``Transport`` over AsyncHTTPClient: connection pooling, HTTP/2 when the server offers
/// it, and TLS through SwiftNIO SSL. The default on Linux.
///
/// ``shared`` serves every client that does not bring its own transport. A transport made
/// with your own `HTTPClient.Configuration` owns its `HTTPClient`: call ``shutdown()`` when
/// you are done with it (it is also shut down when the transport is released).
public final class AsyncHTTPClientTransport: Transport {
    /// The transport every client uses by default on Linux, alive for the whole process.
    public static let shared = AsyncHTTPClientTransport(configuration: defaultConfiguration)

    /// Trellis's defaults: full certificate verification, redirects left to the client's
    /// ``RedirectPolicy`` (a transport that followed them too would bypass its checks), a
    /// 10-second connect timeout, HTTP/2 when offered, and no silent retrying of
    /// failed connection attempts (AsyncHTTPClient's default retries a refused connection until
    /// the connect timeout; a refused connection should fail at once).
    public static var defaultConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            certificateVerification: .fullVerification,
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10))
        )
        configuration.httpVersion = .automatic
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    /// The underlying client, for every host that is not pinned.
    public let httpClient: HTTPClient
    private let ownsClient: Bool
    /// Set by ``shutdown()`` before the clients are shut down. AsyncHTTPClient fails a request
    /// to a client that is shutting down without a word to its delegate: a call that sees this
    /// set waits for the task's result instead (see `sendBuffered`).
    private let isShuttingDown = ManagedAtomic(false)
    /// The pins this transport checks, if any.
    public let pinning: CertificatePinning?
    /// Where a request to a host that is not pinned goes: ``httpClient``.
    private let defaultRoute: Route
    /// One client per pinned host pattern, in the order of `pinning.hosts`: a connection
    /// pool only ever holds connections checked against one set of pins.
    private let pinnedRoutes: [Route]
    /// The deadlines of the calls under way over the delegate API, which fail their tasks.
    private let deadlines = DeadlineTimer<HTTPClient.Task<Void>> { task in
        task.fail(reason: HTTPClientError.deadlineExceeded)
    }
    /// Requests made for recent URLs, which a call to one of them reuses (see `PreparedRequests`).
    let preparedRequests = PreparedRequests()
    /// Whether AsyncHTTPClient decodes compressed bodies itself (its `decompression` setting),
    /// so the client's compression stage must not decode them again.
    public let decodesContentEncoding: Bool

    /// A transport with its own `HTTPClient` made from `configuration`, checking `pinning`.
    ///
    /// Redirects are the client's (``RedirectPolicy``): `configuration.redirectConfiguration`
    /// is set to `.disallow`. A transport that followed them itself would take a request, and
    /// the credentials on it, to another origin without the redirect stage's checks.
    ///
    /// The client's own tracing (`configuration.tracing.tracer`) is turned off: Trellis traces
    /// each call itself and sends its context with every hop. AsyncHTTPClient's span would be a
    /// second one, a root span cut off from the call when it starts on the event loop, and on
    /// a request with a body its context would go out as a second `traceparent` field.
    ///
    /// Each pinned host pattern gets a client of its own (sharing the event loops), whose
    /// trust roots are the pinned CA certificates and which checks the server certificate
    /// of every new connection right after the handshake, before the connection carries a
    /// request. A mismatch closes the connection and fails the request with
    /// ``TrellisError/pinningFailed(_:)``.
    public init(
        configuration: HTTPClient.Configuration = AsyncHTTPClientTransport.defaultConfiguration,
        pinning: CertificatePinning? = nil
    ) {
        var configuration = configuration
        configuration.tracing.tracer = nil
        configuration.redirectConfiguration = .disallow
        let hint = ConnectionLoopHint(group: HTTPClient.defaultEventLoopGroup)
        self.httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.configuration(configuration, watchedBy: hint))
        self.defaultRoute = Route(client: httpClient, pins: nil, hint: hint)
        self.ownsClient = true
        self.pinning = pinning
        if case .enabled = configuration.decompression { self.decodesContentEncoding = true } else { self.decodesContentEncoding = false }
        self.pinnedRoutes = (pinning?.hosts ?? []).map { pins in
            let hint = ConnectionLoopHint(group: HTTPClient.defaultEventLoopGroup)
            let client = HTTPClient(
                eventLoopGroupProvider: .singleton,
                configuration: Self.configuration(Self.configuration(configuration, checking: pins), watchedBy: hint)
            )
            return Route(client: client, pins: pins, hint: hint)
        }
    }

    /// A transport with Trellis's defaults and its own connect timeout: how long opening a
    /// connection (TCP and TLS) may take, apart from the request's overall timeout. A host
    /// that does not answer then fails fast with ``TrellisError/connectionFailed(_:)`` (which
    /// a ``RetryPolicy`` retries) instead of using up the whole request timeout.
    public convenience init(connectTimeout: Duration, pinning: CertificatePinning? = nil) {
        var configuration = Self.defaultConfiguration
        configuration.timeout.connect = TimeAmount(connectTimeout)
        self.init(configuration: configuration, pinning: pinning)
    }

    /// A transport over an `HTTPClient` you manage (and shut down) yourself. Trellis decodes
    /// compressed bodies itself; leave the client's `decompression` disabled (its default), or
    /// turn the client's ``Client/Configuration/Compression/decodesResponses`` off. Trellis also
    /// traces each call itself: set the client's `tracing.tracer` to `nil` so that a call makes
    /// one span, not two.
    public init(httpClient: HTTPClient) {
        self.httpClient = httpClient
        // The transport cannot watch the connections of a client it did not make.
        self.defaultRoute = Route(client: httpClient, pins: nil, hint: nil)
        self.ownsClient = false
        self.pinning = nil
        self.pinnedRoutes = []
        self.decodesContentEncoding = false
    }

    deinit {
        if ownsClient {
            httpClient.shutdown { _ in }
        }
        for route in pinnedRoutes {
            route.client.shutdown { _ in }
        }
    }

    /// Shuts down the owned `HTTPClient`s, closing their connections.
    public func shutdown() async throws {
        isShuttingDown.store(true, ordering: .sequentiallyConsistent)
        if ownsClient {
            try await httpClient.shutdown()
        }
        for route in pinnedRoutes {
            try await route.client.shutdown()
        }
    }

    /// `base` with `pins` enforced: pinned CA certificates as the only trust roots, or no
    /// chain verification when the server must present a pinned certificate exactly (the
    /// check after the handshake does that), and the post-handshake check on every new
    /// HTTP/1 and HTTP/2 connection.
    private static func configuration(
        _ base: HTTPClient.Configuration,
        checking pins: PinnedHost
    ) -> HTTPClient.Configuration {
        var configuration = base
        configuration.tlsConfiguration = pins.enforcing(on: base.tlsConfiguration ?? .makeClientConfiguration())
        // A mismatch is not transient: trying the connection again until the deadline would
        // only delay the failure.
        configuration.connectionPool.retryConnectionEstablishment = false
        let check: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
            channel.nioSSL_peerCertificate().flatMapThrowing(pins.verify).flatMapError { error in
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(error)
            }
        }
        configuration.http1_1ConnectionDebugInitializer = Self.chain(check, base.http1_1ConnectionDebugInitializer)
        configuration.http2ConnectionDebugInitializer = Self.chain(check, base.http2ConnectionDebugInitializer)
        return configuration
    }

    /// `base` with each new HTTP/1 and HTTP/2 connection watched by `hint`, each HTTP/1
    /// connection and HTTP/2 stream guarded against a status AsyncHTTPClient would trap on
    /// (see `ResponseStatusGuard`), each HTTP/1 connection against the bytes an answer left
    /// behind (see `ReusedConnectionGuard`), and each HTTP/2 connection closed when its frames cannot be
    /// parsed (see `HTTP2ConnectionBreak`).
    private static func configuration(
        _ base: HTTPClient.Configuration,
        watchedBy hint: ConnectionLoopHint
    ) -> HTTPClient.Configuration {
        var configuration = base
        let watch: @Sendable (any Channel) -> EventLoopFuture<Void> = { hint.watch($0) }
        let guardConnection: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
            ResponseStatusGuard.installOnConnection(channel).flatMap { ReusedConnectionGuard.install(on: channel) }
        }
        let guardStream: @Sendable (any Channel) -> EventLoopFuture<Void> = { ResponseStatusGuard.installOnStream($0) }
        configuration.http1_1ConnectionDebugInitializer = Self.chain(
            watch, Self.chain(guardConnection, base.http1_1ConnectionDebugInitializer)
        )
        let closeWhenBroken: @Sendable (any Channel) -> EventLoopFuture<Void> = { HTTP2ConnectionBreak.install(on: $0) }
        configuration.http2ConnectionDebugInitializer = Self.chain(
            watch, Self.chain(closeWhenBroken, base.http2ConnectionDebugInitializer)
        )
        configuration.http2StreamChannelDebugInitializer = Self.chain(guardStream, base.http2StreamChannelDebugInitializer)
        return configuration
    }

    private static func chain(
        _ first: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>,
        _ second: (@Sendable (any Channel) -> EventLoopFuture<Void>)?
    ) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        guard let second else { return first }
        return { channel in first(channel).flatMap { second(channel) } }
    }

    /// A client, the pins it checks, and the hint that notes the loop its connections last
    /// read on (none for a client the caller brought).
    private struct Route: Sendable {
        let client: HTTPClient
        let pins: PinnedHost?
        let hint: ConnectionLoopHint?
    }

    /// The route of `request`.
    private func route(for request: Request) -> Route {
        guard let pinning, request.head.scheme?.lowercased() == "https",
            let index = pinning.index(for: PlainHTTPPolicy.host(of: request.head.authority ?? ""))
        else {
            return defaultRoute
        }
        return pinnedRoutes[index]
    }

    /// The hints of the clients the transport made, the default one first; for tests.
    var loopHints: [ConnectionLoopHint] {
        ([defaultRoute] + pinnedRoutes).compactMap(\.hint)
    }

    private static func responseHead(status: HTTPResponseStatus, headers: HTTPHeaders) -> HTTPResponse {
        var fields = HTTPFields()
        fields.reserveCapacity(headers.count)
        for (name, value) in headers {
            if let fieldName = Self.commonFieldName(name) ?? HTTPField.Name(name) {
                fields.append(HTTPField(name: fieldName, value: value))
            }
        }
        return HTTPResponse(status: .init(code: Int(status.code), reasonPhrase: status.reasonPhrase), headerFields: fields)
    }

    /// The name of a field most responses carry, spelled as HTTPTypes spells it, without
    /// checking and lowercasing it again: every response's head is converted, and those two
    /// steps were half of the conversion's time (measured in `Benchmarks/`). The result is the
    /// name `HTTPField.Name(name)` would make.
    static func commonFieldName(_ name: String) -> HTTPField.Name? {
        switch name {
        case "Content-Type": .contentType
        case "Content-Length": .contentLength
        case "Date": .date
        case "Server": .server
        case "Connection": .connection
        case "Cache-Control": .cacheControl
        case "ETag": .eTag
        case "Last-Modified": .lastModified
        case "Vary": .vary
        case "Content-Encoding": .contentEncoding
        case "Transfer-Encoding": .transferEncoding
        case "Set-Cookie": .setCookie
        case "Location": .location
        default: nil
        }
    }

    /// Sends the request; AsyncHTTPClient's deadline (the limits') bounds the wait for the
    /// response head. A buffered call's body is read by the deadline too; a streamed body
    /// streams as the caller reads it, watched for the idle timeout.
    ///
    /// A buffered call with no body, or with one in memory made alone, goes through
    /// AsyncHTTPClient's delegate API, whose deadline covers the whole exchange and which
    /// gathers the body on the event loop. A call with a body goes through the async API and
    /// `collect(_:upTo:announced:within:of:host:)` instead when other calls are under way, or
    /// when the client is one the caller brought: its delegate would run on a loop other than
    /// its connection's as often as not, and the body would be written through that loop,
    /// keeping the connection busy longer. A call made alone through a client the transport
    /// made runs its delegate on its connection's loop (see `ConnectionLoopHint`).
    public func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        let route = route(for: request)
        // Every call counts, whichever way it goes, so that a call overlapping one with a
        // body (or a stream) is known not to be alone.
        let preferred = route.hint?.begin()
        defer { route.hint?.end() }
        if let bufferLimit = limits.bufferLimit, request.body == nil || (request.body?.bytes != nil && preferred != nil) {
            return try await sendBuffered(request, upTo: bufferLimit, within: limits, through: route, preferring: preferred)
        }
        let timeout = limits.timeout
        let deadline = limits.deadline
        var outgoing = HTTPClientRequest(url: request.urlString)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        outgoing.headers.reserveCapacity(request.headerFields.count)
        request.forEachWireField { name, value in outgoing.headers.add(name: name, value: value) }
        if let body = request.body {
            if let bytes = body.bytes {
                outgoing.body = .bytes(bytes)
            } else {
                let length: HTTPClientRequest.Body.Length = body.length.map { .known($0) } ?? .unknown
                outgoing.body = .stream(RequestBodyChunks(body: body), length: length)
            }
        }
        let host = request.head.authority ?? ""
        let (client, pins) = (route.client, route.pins)
        let response: HTTPClientResponse
        do {
            response = try await Self.waitingForAConnection(until: deadline) { remaining in
                try await client.execute(outgoing, deadline: .now() + TimeAmount(remaining))
            }
        } catch {
            throw Self.translate(error, host: host, timeout: timeout, request: request, pins: pins)
        }
        let head = Self.responseHead(status: response.status, headers: response.headers)
        let expectedLength = response.headers.first(name: "content-length").flatMap { Int64($0) }
        if let bufferLimit = limits.bufferLimit {
            let bytes: ByteBuffer
            do {
                bytes = try await Self.collect(response.body, upTo: bufferLimit, announced: expectedLength, within: limits, of: request, host: host)
            } catch TrellisError.connectionFailed(let failure) where request.body != nil {
                throw TrellisError.connectionFailed(Self.answeredDuringUpload(failure, status: response.status))
            }
            return Response(head: head, body: ResponseBody(bytes))
        }
        let chunks = response.body
        let body = ResponseBody(expectedLength: expectedLength) {
            var iterator = chunks.makeAsyncIterator()
            return ChunkIterator {
                do {
                    return try await iterator.next()
                } catch {
                    throw Self.translate(error, host: host, timeout: timeout, request: request)
                }
            }
        }
        return limits.watchingIdleTime(Response(head: head, body: body), of: request)
    }

    /// A buffered call's body in memory, by the call's deadline: AsyncHTTPClient's own
    /// deadline stops at the response head.
    ///
    /// The body is read in a task of its own, which expiry cancels (closing the connection).
    /// The task starts on the calling thread, and a small body has usually arrived with the
    /// head, so it often completes without ever being scheduled.
    private static func collect(
        _ body: HTTPClientResponse.Body,
        upTo limit: Int,
        announced: Int64?,
        within limits: ExchangeLimits,
        of request: Request,
        host: String
    ) async throws -> ByteBuffer {
        if let announced, announced > limit {
            throw TrellisError.responseTooLarge(ResponseTooLarge(limit: limit, announcedLength: announced))
        }
        let timeout = limits.timeout
        do {
            return try await Deadline.run(until: limits, describing: request) {
                var collected = ByteBuffer()
                do {
                    for try await var chunk in body {
                        guard collected.readableBytes + chunk.readableBytes <= limit else {
                            throw TrellisError.responseTooLarge(ResponseTooLarge(limit: limit, announcedLength: announced))
                        }
                        if collected.readableBytes == 0 { collected = chunk } else { collected.writeBuffer(&chunk) }
                    }
                } catch {
                    throw Self.translate(error, host: host, timeout: timeout, request: request)
                }
                return collected
            }
        } catch TrellisError.connectionFailed(let failure) where failure.mayBeStaleConnection {
            throw TrellisError.connectionFailed(failure.afterPartOfAResponse)
        }
    }

    /// A buffered call with no request body or one in memory, over the delegate API: one
    /// resumption of the caller when the whole response is in, where the async API's body
    /// needs a task of its own to be held to the deadline, and a second resumption whenever the
    /// body comes after the head.
    ///
    /// The delegate resumes the caller itself, on the event loop, when the exchange ends.
    /// Waiting on the task's future instead registers a callback from off the event loop,
    /// which is one more job sent to that loop, and often a wake-up, on every call (measured
    /// in `Benchmarks/`). AsyncHTTPClient tells the delegate how every exchange ends, except
    /// when its client is shutting down, and on a redirect it follows itself, which only a
    /// client Trellis does not own can do: then the task's result ends the wait as well.
    private func sendBuffered(
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
            throw Self.translate(error, host: host, timeout: timeout, request: request, pins: pins)
        }
        // A fresh delegate for each attempt; the last one tells whether part of a response came.
        var delegate: BufferingDelegate?
        do {
            let (head, body) = try await Self.waitingForAConnection(until: deadline) { remaining in
                let attempt = BufferingDelegate(limit: limit)
                delegate = attempt
                let task = client.execute(request: outgoing, delegate: attempt, eventLoop: preferred.map { .delegate(on: $0) } ?? .indifferent)
                attempt.hold(to: deadlines.watch(task, until: .now() + TimeAmount(remaining)), of: deadlines)
                // Read after `execute`: a shutdown that began in time to fail this request had
                // set the flag before it began.
                if !ownsClient || isShuttingDown.load(ordering: .sequentiallyConsistent) {
                    // A success has ended the wait already: the delegate ends it as it finishes.
                    task.futureResult.whenFailure { attempt.end(.failure($0)) }
                }
                return try await withTaskCancellationHandler {
                    try await attempt.response()
                } onCancel: {
                    task.cancel()
                }
            }
            return Response(head: Self.responseHead(status: head.status, headers: head.headers), body: ResponseBody(body))
        } catch {
            var translated = Self.translate(error, host: host, timeout: timeout, request: request, pins: pins)
            if let status = delegate?.receivedStatus, case TrellisError.connectionFailed(let answered) = translated {
                var failure = answered.afterPartOfAResponse
                if request.body != nil { failure = Self.answeredDuringUpload(failure, status: status) }
                translated = TrellisError.connectionFailed(failure)
            }
            throw translated
        }
    }

    /// `failure`, which broke the response to a request with a body, with the status the
    /// server had answered (300 or more) named in it.
    ///
    /// A server may refuse an upload before it has read it, a 413 to a body too large, with
    /// `Connection: close`. AsyncHTTPClient stops sending once such an answer has come, closes
    /// the connection when the answer has ended, and then fails the exchange for the body it
    /// could not write ("I/O on closed channel"), dropping the rest of the answer. The status
    /// is all that is left of the refusal; without it the caller would see a broken connection.
    static func answeredDuringUpload(_ failure: ConnectionFailure, status: HTTPResponseStatus) -> ConnectionFailure {
        guard status.code >= 300 else { return failure }
        var named = ConnectionFailure(
            host: failure.host,
            reason: "the server answered \(status.code) \(status.reasonPhrase) to a request with a body, "
                + "and the connection closed before the rest of the answer arrived (\(failure.reason))",
            underlying: failure.underlying
        )
        // What the failure was still holds: an answer that broke HTTP is not retried.
        named.isProtocolViolation = failure.isProtocolViolation
        return named
    }

    /// `send` again and again while AsyncHTTPClient gives up on it for want of a free
    /// connection, until `deadline`.
    ///
    /// AsyncHTTPClient bounds a request's wait in its pool by the connect timeout (10 s by
    /// default), whatever the request's deadline: under load (more concurrent calls to a host
    /// than it keeps connections), a call with a minute to go failed after 10 s in the queue.
    /// Such a request never left the queue, so nothing of it was sent, not even the first byte
    /// of a streamed body, and sending it again is safe whatever its method.
    ///
    /// Each round lasts at least `minimumRound`: with a connect timeout of zero or near it,
    /// the pool gives up at once, and resending at once would spin until the deadline. `send`
    /// gets the time left when its round started, so a call reads the clock once here, not
    /// again for AsyncHTTPClient's deadline.
    static func waitingForAConnection<Result>(
        until deadline: ContinuousClock.Instant,
        minimumRound: Duration = .milliseconds(100),
        _ send: (_ remaining: Duration) async throws -> Result
    ) async throws -> Result {
        while true {
            let started = ContinuousClock.now
            do {
                return try await send(deadline - started)
            } catch let error as HTTPClientError where error == .getConnectionFromPoolTimeout && .now < deadline {
                let resend = min(started + minimumRound, deadline)
                if resend > .now { try await Task.sleep(until: resend, clock: .continuous) }
                guard .now < deadline else { throw error }
            }
        }
    }

    /// AsyncHTTPClient's and SwiftNIO's errors as ``TrellisError``, cancellation as
    /// `CancellationError`.
    static func translate(
        _ error: any Error,
        host: String,
        timeout: Duration,
        request: Request,
        pins: PinnedHost? = nil
    ) -> any Error {
        if error is CancellationError || error is TrellisError { return error }
        if let tooLarge = error as? BufferingDelegate.TooLarge {
            return TrellisError.responseTooLarge(ResponseTooLarge(limit: tooLarge.limit, announcedLength: tooLarge.announcedLength))
        }
        if let mismatch = error as? PinMismatch {
            return TrellisError.pinningFailed(ConnectionFailure(host: host, reason: mismatch.reason, underlying: error))
        }
        if let clientError = error as? HTTPClientError {
            switch clientError {
            case .cancelled, .requestStreamCancelled:
                // AsyncHTTPClient also reports a request it gave up on itself as cancelled: an
                // HTTP/2 stream the server reset can end that way. Only the caller's own
                // cancellation is a `CancellationError`.
                guard !Task.isCancelled else { return CancellationError() }
                return TrellisError.connectionFailed(ConnectionFailure(
                    host: host, reason: "AsyncHTTPClient gave up on the exchange before the response was complete", underlying: clientError
                ))
            case .connectTimeout:
                return TrellisError.connectionFailed(
                    ConnectionFailure(host: host, reason: "no connection within the connect timeout", underlying: clientError)
                )
            case .deadlineExceeded, .readTimeout, .writeTimeout, .getConnectionFromPoolTimeout, .tlsHandshakeTimeout:
                return TrellisError.timedOut(TimeoutFailure(timeout: timeout, request: RequestLog.summary(request)))
            case .remoteConnectionClosed:
                var failure = ConnectionFailure(
                    host: host, reason: "the server closed the connection before the response was complete", underlying: clientError
                )
                failure.mayBeStaleConnection = true
                return TrellisError.connectionFailed(failure)
            case .bodyLengthMismatch:
                return TrellisError.connectionFailed(
                    ConnectionFailure(host: host, reason: "the body was shorter or longer than its Content-Length", underlying: clientError)
                )
            case .invalidURL, .emptyHost, .emptyScheme:
                return TrellisError.invalidRequest(InvalidRequest(.url, "\(RequestLog.redactedURL(request)) cannot be sent: \(clientError)"))
            default:
                return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "\(clientError)", underlying: clientError))
            }
        }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            if let pins, !pins.anchors.isEmpty {
                // The pinned CA certificates are the only trust roots: a chain the TLS stack
                // rejects does not lead to one of them.
                return TrellisError.pinningFailed(ConnectionFailure(
                    host: host,
                    reason: "the server's certificate chain does not lead to a pinned CA certificate (\(error))",
                    underlying: error
                ))
            }
            return TrellisError.tlsFailed(ConnectionFailure(host: host, reason: "\(error)", underlying: error))
        }
        if let refused = error as? RefusedStatus {
            return notHTTP("the status \(refused.status) is not one of 100 to 999", version: refused.version, host: host, underlying: error)
        }
        if let closed = error as? NIOHTTP2Errors.StreamClosed {
            var reason = "the HTTP/2 stream was closed with \(Self.name(of: closed.errorCode)) before the response was complete"
            // SwiftNIO closes a stream so itself when the answer breaks HTTP/2 (no `:status`, a
            // body longer or shorter than its `content-length`); a server closes one so when
            // it takes the request for broken. Sending it again would meet the same end.
            let brokeHTTP2 = closed.errorCode == .protocolError
            if brokeHTTP2 { reason += " (an answer without :status, or with a body its content-length does not match, ends so)" }
            var failure = ConnectionFailure(host: host, reason: reason, underlying: error)
            failure.isProtocolViolation = brokeHTTP2
            return TrellisError.connectionFailed(failure)
        }
        if let broken = error as? BrokenHTTP2Connection {
            return notHTTP(
                "a frame could not be parsed: a header block past SwiftNIO's 16 KB once decoded, or bytes that are not HTTP/2",
                version: "HTTP/2", host: host, underlying: broken.cause
            )
        }
        if let leftover = error as? LeftoverBytes {
            var failure = ConnectionFailure(
                host: host,
                reason: "the answer on a reused connection began with bytes the previous answer left behind (\(leftover.cause))",
                underlying: leftover.cause
            )
            failure.failedOnReusedConnection = true
            return TrellisError.connectionFailed(failure)
        }
        if let parserError = error as? HTTPParserError {
            var failure = ConnectionFailure(host: host, reason: Self.describe(parserError), underlying: error)
            // A response cut off by the connection's end is a broken connection, not a
            // malformed answer.
            failure.isProtocolViolation = parserError != .invalidEOFState
            return TrellisError.connectionFailed(failure)
        }
        if case ChannelError.ioOnClosedChannel = error {
            // Met when a request is to go out on a pooled connection that has just closed: a
            // stale connection's break, unless part of an answer had come (the callers clear it
            // then).
            var failure = ConnectionFailure(host: host, reason: "the connection closed under the request (I/O on closed channel)", underlying: error)
            failure.mayBeStaleConnection = true
            return TrellisError.connectionFailed(failure)
        }
        if case ChannelError.connectTimeout = error {
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "no connection within the connect timeout", underlying: error))
        }
        if let connectionError = error as? NIOConnectionError {
            if connectionError.connectionErrors.isEmpty, connectionError.dnsAError != nil || connectionError.dnsAAAAError != nil {
                return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "unknown host", underlying: error))
            }
            if let first = connectionError.connectionErrors.first?.error as? IOError {
                return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: Self.describe(first), underlying: error))
            }
        }
        if case .unknown = error as? SocketAddressError {
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "unknown host", underlying: error))
        }
        if let ioError = error as? IOError {
            var failure = ConnectionFailure(host: host, reason: Self.describe(ioError), underlying: ioError)
            failure.mayBeStaleConnection = ioError.errnoCode == ECONNRESET || ioError.errnoCode == EPIPE
            return TrellisError.connectionFailed(failure)
        }
        return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "\(error)", underlying: error))
    }

    /// What was wrong with a response SwiftNIO could not parse: its own texts name the parser's
    /// state ("invalid constant string"), not the fault.
    private static func describe(_ error: HTTPParserError) -> String {
        switch error {
        case .headerOverflow: "the response's header fields went past SwiftNIO's limit of 80 KB"
        case .invalidEOFState: "the server closed the connection before the response was complete"
        default: ConnectionFailure.notHTTP("\(error)")
        }
    }

    /// The failure of an answer that breaks the protocol: never retried, since the same server
    /// would answer the same way.
    private static func notHTTP(_ fault: String, version: String, host: String, underlying: any Error) -> TrellisError {
        var failure = ConnectionFailure(host: host, reason: ConnectionFailure.notHTTP(fault, version: version), underlying: underlying)
        failure.isProtocolViolation = true
        return TrellisError.connectionFailed(failure)
    }

    /// An HTTP/2 error code by its name in RFC 9113 (section 7); SwiftNIO's own text carries
    /// its source location.
    private static func name(of code: NIOHTTP2.HTTP2ErrorCode) -> String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
            "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return names.indices.contains(code.networkCode) ? names[code.networkCode] : "error code \(code.networkCode)"
    }

    private static func describe(_ error: IOError) -> String {
        switch error.errnoCode {
        case ECONNREFUSED: "connection refused"
        case ECONNRESET: "connection reset by the server"
        default: "\(error)"
        }
    }
}

/// Gathers a response into memory on the event loop, refusing more than `limit` bytes, and
/// hands the outcome to the call waiting in ``response()``.
private final class BufferingDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    // Touched only on the request's event loop, where AsyncHTTPClient calls a delegate, except
    // `receivedStatus`, read after the exchange has ended (the end is handed over under
    // `outcome`'s lock), and `outcome` itself.
    struct TooLarge: Error {
        let limit: Int
        let announcedLength: Int64?
    }

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

    private let limit: Int
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()
    private var announcedLength: Int64?
    private let outcome = NIOLockedValueBox(Outcome())
    /// The status of the response head, once one has come.
    var receivedStatus: HTTPResponseStatus? { head?.status }

    init(limit: Int) {
        self.limit = limit
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
        announcedLength = head.headers.first(name: "content-length").flatMap { Int64($0) }
        if let announcedLength, announcedLength > limit {
            return task.eventLoop.makeFailedFuture(TooLarge(limit: limit, announcedLength: announcedLength))
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard body.readableBytes + buffer.readableBytes <= limit else {
            return task.eventLoop.makeFailedFuture(TooLarge(limit: limit, announcedLength: announcedLength))
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

/// A streamed request body as AsyncHTTPClient reads it.
private struct RequestBodyChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: RequestBody

    func makeAsyncIterator() -> ChunkIterator {
        body.makeChunkIterator()
    }
}

