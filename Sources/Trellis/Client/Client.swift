public import Foundation
import HTTPTypes
public import Logging
import NIOCore
import NIOFoundationCompat

/// Sends requests through an ordered chain of middlewares to a transport, and turns responses
/// into values.
///
/// A client holds every setting a service uses: the base URL, the transport, the middlewares,
/// the JSON coders, the timeout, the buffering limit and the logger. Nothing is global: two
/// clients in one process never see each other's settings.
///
/// ```swift
/// let client = Client(
///     baseURL: URL(string: "https://api.example.com/v1")!,
///     middlewares: [UserAgent()],
///     timeout: .seconds(20)
/// )
/// let blog = BlogService(client: client)
/// ```
public final class Client: Sendable {
    /// 64 MiB: the default for ``maximumBodySize``.
    public static let defaultMaximumBodySize = 64 * 1024 * 1024

    /// The URL every endpoint path is appended to (`https://api.example.com/v1` + `/posts`).
    public let baseURL: URL
    /// What sends requests over the network.
    public let transport: any Transport
    /// The middlewares, outermost first.
    public let middlewares: [any Middleware]
    /// Encodes JSON request bodies.
    public let encoder: JSONEncoder
    /// Decodes JSON response bodies.
    public let decoder: JSONDecoder
    /// How long a request may take, from sending to the last byte of a buffered body, unless
    /// the request sets its own.
    public let timeout: Duration
    /// The largest response body the client reads into memory; streamed downloads are not
    /// bound by it.
    public let maximumBodySize: Int
    /// Where requests and responses are logged, at debug level, with credentials redacted.
    public let logger: Logger
    /// How access tokens are stored, sent and refreshed.
    public var accessTokens: AccessTokenSettings { authorizer.settings }
    /// How redirects are followed.
    public let redirects: RedirectPolicy
    /// How failed requests are retried (none by default); a request's own
    /// ``Request/retryPolicy`` wins.
    public let retryPolicy: RetryPolicy
    /// The statuses a buffered call accepts; 200...299 by default.
    public let acceptedStatuses: Set<Int>
    /// Checks made before every request is sent.
    public let preconditions: [Precondition]
    /// Checks of every buffered response whose status was accepted.
    public let validations: [ResponseValidation]
    /// Whether plain `http://` requests may be sent (by default they may).
    public let plainHTTP: PlainHTTPPolicy
    /// The certificates and keys pinned per host, checked by the transport in each TLS
    /// handshake.
    public let pinning: CertificatePinning?
    /// Set when a transport was passed with pins other than ``pinning``: every request then
    /// fails with it rather than go out unchecked.
    let pinningConflict: TrellisError?

    let authorizer: AccessTokenAuthorizer

    let base: Result<BaseURL, TrellisError>

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - baseURL: an absolute `http` or `https` URL; a relative one makes every request fail
    ///     with ``TrellisError/invalidRequest(_:)`` before anything is sent.
    ///   - transport: defaults to ``Transports/platformDefault``: AsyncHTTPClient on Linux,
    ///     URLSession on Apple platforms.
    ///   - middlewares: run in order on the way out, in reverse on the way back.
    ///   - beforeSending: an interceptor run after the middlewares, just before the transport.
    ///   - onResponse: an interceptor that sees each response first, with its body in memory.
    ///   - accessTokens: where tokens are stored, who refreshes them and when.
    ///   - redirects: how many redirects to follow, and whether to follow https to http.
    ///   - retryPolicy: when to send a failed request again; ``RetryPolicy/none`` by default.
    ///   - acceptedStatuses: the statuses buffered calls accept (add 304, say).
    ///   - preconditions: checks made before each request; a failing one means nothing is sent.
    ///   - validations: checks of each buffered response; a failing one becomes the call's error.
    ///   - plainHTTP: refuse unencrypted `http://` requests, to every host or all but loopback.
    ///   - pinning: certificates and public keys pinned per host. Without a `transport`, the
    ///     client makes a platform default transport of its own that checks them; a transport
    ///     you pass must be made with the same pins
    ///     (`AsyncHTTPClientTransport(pinning:)`, `URLSessionTransport(pinning:)`), or every
    ///     request fails with ``TrellisError/invalidRequest(_:)``.
    public init(
        baseURL: URL,
        transport: (any Transport)? = nil,
        middlewares: [any Middleware] = [],
        encoder: JSONEncoder = JSONEncoder(),
        decoder: JSONDecoder = JSONDecoder(),
        timeout: Duration = .seconds(60),
        maximumBodySize: Int = Client.defaultMaximumBodySize,
        logger: Logger = Logger(label: "Trellis"),
        beforeSending: BeforeSending? = nil,
        onResponse: OnResponse? = nil,
        accessTokens: AccessTokenSettings = AccessTokenSettings(),
        redirects: RedirectPolicy = .follow,
        retryPolicy: RetryPolicy = .none,
        acceptedStatuses: Set<Int> = Set(200...299),
        preconditions: [Precondition] = [],
        validations: [ResponseValidation] = [],
        plainHTTP: PlainHTTPPolicy = .allowed,
        pinning: CertificatePinning? = nil
    ) {
        self.plainHTTP = plainHTTP
        self.pinning = pinning
        self.pinningConflict = Self.pinningConflict(pinning, transport: transport)
        self.retryPolicy = retryPolicy
        self.acceptedStatuses = acceptedStatuses
        self.preconditions = preconditions
        self.validations = validations
        self.baseURL = baseURL
        self.base = BaseURL.parse(baseURL)
        self.authorizer = AccessTokenAuthorizer(settings: accessTokens, base: try? base.get())
        self.redirects = redirects
        self.transport = transport ?? pinning.map(Transports.platformDefault(pinning:)) ?? Transports.platformDefault
        var chain = middlewares
        if beforeSending != nil || onResponse != nil {
            chain.append(
                InterceptorMiddleware(beforeSending: beforeSending, onResponse: onResponse, maximumBodySize: maximumBodySize)
            )
        }
        self.middlewares = chain
        self.encoder = encoder
        self.decoder = decoder
        self.timeout = timeout
        self.maximumBodySize = maximumBodySize
        self.logger = logger
    }

    // MARK: Streaming

    /// Sends a request through the middlewares and the transport and returns the response as
    /// it arrives, whatever its status, with the body still to be read.
    ///
    /// The timeout covers the time until the response head arrives; reading the body is up to
    /// the caller. The other methods buffer, validate and decode.
    ///
    /// - Parameter extraMiddlewares: run after the client's own, closest to the transport (a
    ///   service's interceptors use this).
    public func send(
        _ request: Request,
        middlewares extraMiddlewares: [any Middleware] = []
    ) async throws -> Response<ResponseBody> {
        try await checkPreconditions(of: request)
        return try await withRetries(of: request) {
            try await self.sendOnce(request, middlewares: extraMiddlewares)
        } head: { response in
            response.head
        } discard: { response in
            await response.body.discard()
        }
    }

    /// One attempt: the middlewares, the token, the redirects and the transport.
    private func sendOnce(
        _ request: Request,
        middlewares extraMiddlewares: [any Middleware]
    ) async throws -> Response<ResponseBody> {
        try Task.checkCancellation()
        var request = request
        let limit = request.timeout ?? timeout
        request.timeout = limit
        if request.deadline == nil { request.deadline = .now + limit }
        if let type = request.body?.defaultContentType, request.headerFields[.contentType] == nil {
            request.headerFields[.contentType] = type
        }
        return try await runChain(request, at: 0, extra: extraMiddlewares)
    }

    /// Runs `request` through the middlewares from `index` on, then the access token, then
    /// `terminal` when one is given (a WebSocket upgrade), else redirects and the transport.
    func runChain(
        _ request: Request,
        at index: Int,
        extra: [any Middleware],
        terminal: (@Sendable (Request) async throws -> Response<ResponseBody>)? = nil
    ) async throws -> Response<ResponseBody> {
        let middleware: any Middleware
        if index < middlewares.count {
            middleware = middlewares[index]
        } else if index - middlewares.count < extra.count {
            middleware = extra[index - middlewares.count]
        } else {
            // The built-in last stages: the access token goes on after every middleware has
            // seen the request, and redirects are followed closest to the wire so that each hop
            // is checked for its origin.
            return try await authorizer.send(request, client: self) { authorized in
                if let terminal { return try await terminal(authorized) }
                return try await self.redirects.send(authorized) { hop in
                    try await self.sendOverTransport(hop)
                }
            }
        }
        return try await middleware.intercept(request) { next in
            try await self.runChain(next, at: index + 1, extra: extra, terminal: terminal)
        }
    }

    private static func pinningConflict(_ pinning: CertificatePinning?, transport: (any Transport)?) -> TrellisError? {
        guard let pinning, let transport else { return nil }
        let transportPins: CertificatePinning?
        switch transport {
        case let transport as AsyncHTTPClientTransport: transportPins = transport.pinning
        case let transport as URLSessionTransport: transportPins = transport.pinning
        default: return nil  // a transport of your own checks (or mocks) what it will
        }
        guard transportPins != pinning else { return nil }
        return TrellisError.invalidRequest(InvalidRequest(
            .url,
            "the client's pins are not the transport's: make the transport with the same pinning, or pass no transport"
        ))
    }

    private func sendOverTransport(_ request: Request) async throws -> Response<ResponseBody> {
        try Task.checkCancellation()
        if let pinningConflict { throw pinningConflict }
        if plainHTTP != .allowed {
            try plainHTTP.check(request)
        }
        guard logger.logLevel <= .debug else {
            return try await transport.send(request)
        }
        logger.debug("\(RequestLog.describe(request))")
        let started = ContinuousClock.now
        do {
            let response = try await transport.send(request)
            let elapsed = ContinuousClock.now - started
            logger.debug("\(RequestLog.describe(response.head, for: request, after: elapsed))")
            return response
        } catch {
            logger.debug("\(request.method) \(request.urlString) failed: \(error)")
            throw error
        }
    }

    // MARK: Buffered

    /// Sends a request and returns its response with the body in memory, after checking the
    /// status.
    ///
    /// The timeout covers the whole exchange, body included.
    ///
    /// - Throws: ``TrellisError/unacceptableStatus(_:)`` for a status outside 200...299 (and
    ///   outside `extraAcceptedStatuses`), ``TrellisError/responseTooLarge(_:)``, and the
    ///   transport's errors.
    public func data(
        for request: Request,
        middlewares extraMiddlewares: [any Middleware] = [],
        accepting extraAcceptedStatuses: Set<Int> = []
    ) async throws -> Response<Data> {
        let buffered = try await buffered(request, extraMiddlewares, accepting: extraAcceptedStatuses)
        return buffered.withBody(Data(buffer: buffered.body, byteTransferStrategy: .noCopy))
    }

    /// Sends a request and decodes the body as `type`.
    ///
    /// `Data` gets the raw bytes, `String` the text, and an `Optional` is `nil` for 204, 404 or
    /// an empty body. Any other `Decodable` is decoded as JSON with ``decoder``.
    public func value<Value: Decodable>(
        for request: Request,
        as type: Value.Type = Value.self,
        middlewares extraMiddlewares: [any Middleware] = []
    ) async throws -> Value {
        try await response(for: request, as: type, middlewares: extraMiddlewares).body
    }

    /// Sends a request and returns the status and headers with the decoded body.
    public func response<Value: Decodable>(
        for request: Request,
        as type: Value.Type = Value.self,
        middlewares extraMiddlewares: [any Middleware] = []
    ) async throws -> Response<Value> {
        let acceptsMissing = Value.self is any OptionalDecodable.Type
        let buffered = try await buffered(request, extraMiddlewares, accepting: acceptsMissing ? [404] : [])
        return buffered.withBody(try decodeBody(buffered, as: Value.self))
    }

    /// Sends a request and returns its status and headers; the body, if any, is read and
    /// dropped.
    public func response(
        for request: Request,
        middlewares extraMiddlewares: [any Middleware] = []
    ) async throws -> Response<Void> {
        Response(head: try await buffered(request, extraMiddlewares, accepting: []).head)
    }

    /// Sends a request for its effect alone.
    public func perform(_ request: Request, middlewares extraMiddlewares: [any Middleware] = []) async throws {
        _ = try await buffered(request, extraMiddlewares, accepting: [])
    }

    private func buffered(
        _ request: Request,
        _ extraMiddlewares: [any Middleware],
        accepting extraStatuses: Set<Int>
    ) async throws -> Response<ByteBuffer> {
        try await checkPreconditions(of: request)
        let limit = request.timeout ?? timeout
        let response = try await withRetries(of: request) {
            // Each attempt has the whole timeout, body included.
            try await Deadline.run(limit, describing: request) {
                let response = try await self.sendOnce(request, middlewares: extraMiddlewares)
                return response.withBody(try await response.body.collect(upTo: self.maximumBodySize))
            }
        } head: { response in
            response.head
        } discard: { _ in
        }
        let code = response.status.code
        guard (request.acceptedStatuses ?? acceptedStatuses).contains(code) || extraStatuses.contains(code) else {
            throw statusFailure(response, for: request)
        }
        if !validations.isEmpty || !request.validations.isEmpty {
            try validate(response.withBody(Data(buffer: response.body)), of: request)
        }
        return response
    }

    /// Runs `attempt` until it succeeds with a status that is not retried, fails with an
    /// error that is not retried, or the policy says stop; between attempts, waits as the
    /// policy says (cancelling the task ends the wait).
    private func withRetries<Outcome>(
        of request: Request,
        _ attempt: () async throws -> Outcome,
        head: (Outcome) -> HTTPResponse,
        discard: (Outcome) async -> Void
    ) async throws -> Outcome {
        let policy = request.retryPolicy ?? retryPolicy
        guard policy.allowsRetrying(request) else { return try await attempt() }
        var retry = 0
        var waited = Duration.zero
        while true {
            let wait: Duration
            do {
                let outcome = try await attempt()
                let response = head(outcome)
                guard policy.retryableStatuses.contains(response.status.code),
                    let delay = policy.delay(beforeRetry: retry, after: response, waitedSoFar: waited)
                else { return outcome }
                await discard(outcome)
                wait = delay
                logger.debug("\(request.method) \(RequestLog.redactedURL(request)): \(response.status.code), retry \(retry + 1) in \(delay)")
            } catch {
                guard policy.isRetryable(error), let delay = policy.delay(beforeRetry: retry, after: nil, waitedSoFar: waited) else {
                    throw error
                }
                wait = delay
                logger.debug("\(request.method) \(RequestLog.redactedURL(request)): \(error), retry \(retry + 1) in \(delay)")
            }
            try await policy.sleep(wait)
            try Task.checkCancellation()
            waited += wait
            retry += 1
        }
    }

    func statusFailure(_ response: Response<ByteBuffer>, for request: Request) -> TrellisError {
        TrellisError.unacceptableStatus(
            HTTPStatusFailure(
                status: response.status,
                headerFields: response.headerFields,
                body: Data(buffer: response.body),
                request: "\(request.method) \(RequestLog.redactedURL(request))",
                decoder: decoder
            )
        )
    }

    /// The error for a streamed response whose status is not accepted, with as much of its
    /// body as the buffering limit allows (a problem-details document, usually).
    func statusFailure(_ response: Response<ResponseBody>, for request: Request) async -> TrellisError {
        let body = (try? await response.body.collect(upTo: maximumBodySize)) ?? ByteBuffer()
        return statusFailure(response.withBody(body), for: request)
    }

    private func decodeBody<Value: Decodable>(_ response: Response<ByteBuffer>, as type: Value.Type) throws -> Value {
        if let special = SpecialBody.decode(Value.self, from: response) { return special }
        let body = response.body
        guard body.readableBytes > 0 else {
            throw TrellisError.decodingFailed(
                DecodingFailure(type: Value.self, reason: "the body is empty", status: response.status, body: Data())
            )
        }
        do {
            return try decoder.decode(Value.self, from: body)
        } catch {
            if let contentType = response.headerFields[.contentType], !contentType.lowercased().contains("json") {
                // Most likely an error page or a proxy's answer: say so before the parse error.
                throw TrellisError.decodingFailed(DecodingFailure(
                    type: Value.self,
                    reason: "the response is \(contentType.split(separator: ";").first ?? ""), not JSON (\(error))",
                    status: response.status,
                    body: Data(buffer: body)
                ))
            }
            throw TrellisError.decodingFailed(
                DecodingFailure(type: Value.self, error: error, status: response.status, body: Data(buffer: body))
            )
        }
    }
}

/// `Optional` as a type the decoder can recognise at run time, so that an endpoint returning
/// `Post?` gets `nil` for 204 and 404 without the macro having to know the type.
protocol OptionalDecodable {
    static var wrappedType: Any.Type { get }
    static var absent: Self { get }
    static func wrapping(_ value: Any) -> Self?
}

extension Optional: OptionalDecodable {
    static var wrappedType: Any.Type { Wrapped.self }
    static var absent: Self { nil }
    static func wrapping(_ value: Any) -> Self? { (value as? Wrapped).map { .some($0) } }
}

/// Return types whose bodies are not JSON: `Data` (the bytes), `String` (the text), and the
/// `nil` of an optional.
enum SpecialBody {
    static func decode<Value>(_ type: Value.Type, from response: Response<ByteBuffer>) -> Value? {
        if let optional = Value.self as? any OptionalDecodable.Type {
            let status = response.status
            if status == .noContent || status == .resetContent || status == .notFound || response.body.readableBytes == 0 {
                return optional.absent as? Value
            }
            guard let raw = raw(optional.wrappedType, response.body) else { return nil }
            return optional.wrapping(raw) as? Value
        }
        return raw(Value.self, response.body) as? Value
    }

    private static func raw(_ type: Any.Type, _ body: ByteBuffer) -> Any? {
        if type == Data.self { return Data(buffer: body) }
        if type == String.self { return String(buffer: body) }
        return nil
    }
}
