public import Foundation
import HTTPTypes
public import Logging
import NIOCore
import NIOFoundationCompat

/// Sends requests through its pipeline to a transport, and turns responses into values.
///
/// A client holds every setting a service uses: the base URL, the transport, the middlewares
/// and a ``Configuration`` (timeouts, limits, coding, retries, redirects, access tokens,
/// security, checks, logging). Nothing is global: two clients in one process never see each
/// other's settings.
///
/// ```swift
/// let client = Client(baseURL: URL(string: "https://api.example.com/v1")!, middlewares: [UserAgent()]) {
///     $0.timeouts.request = .seconds(20)
///     $0.retry = .standard
/// }
/// let blog = BlogService(client: client)
/// ```
public final class Client: Sendable {
    /// 64 MiB: the default for ``Configuration/Limits/maximumBodySize``.
    public static let defaultMaximumBodySize = 64 * 1024 * 1024

    /// The URL every endpoint path is appended to (`https://api.example.com/v1` + `/posts`).
    public let baseURL: URL
    /// What sends requests over the network.
    public let transport: any Transport
    /// The middlewares, outermost first (the client's, then those added with
    /// ``adding(middlewares:)``), with the interceptors last.
    public let middlewares: [any Middleware]
    /// The client's settings.
    public let configuration: Configuration

    /// Encodes JSON request bodies.
    public var encoder: JSONEncoder { configuration.coding.encoder }
    /// Decodes JSON response bodies.
    public var decoder: JSONDecoder { configuration.coding.decoder }
    /// How long a request may take unless it sets its own (``Configuration/Timeouts/request``).
    public var timeout: Duration { configuration.timeouts.request }
    /// The largest response body the client reads into memory.
    public var maximumBodySize: Int { configuration.limits.maximumBodySize }
    /// Where requests and responses are logged.
    public var logger: Logger { configuration.logger }
    /// How access tokens are stored, sent and refreshed.
    public var accessTokens: AccessTokenSettings { authorizer.settings }
    /// How redirects are followed.
    public var redirects: RedirectPolicy { configuration.redirects }
    /// How failed requests are retried.
    public var retryPolicy: RetryPolicy { configuration.retry }
    /// The statuses a buffered call accepts.
    public var acceptedStatuses: Set<Int> { configuration.validation.acceptedStatuses }
    /// Whether plain `http://` requests may be sent.
    public var plainHTTP: PlainHTTPPolicy { configuration.security.plainHTTP }
    /// The certificates and keys pinned per host.
    public var pinning: CertificatePinning? { configuration.security.pinning }

    /// Set when a transport was passed with pins other than ``pinning``: every request then
    /// fails with it rather than go out unchecked.
    let pinningConflict: TrellisError?
    let authorizer: AccessTokenAuthorizer
    /// What the resilience policies know about each origin, shared with derived clients.
    let resilience: ResilienceState
    let base: Result<BaseURL, TrellisError>
    let pipeline: Pipeline

    /// Creates a client, set up by `configure` from the defaults.
    ///
    /// - Parameters:
    ///   - baseURL: an absolute `http` or `https` URL; a relative one makes every request fail
    ///     with ``TrellisError/invalidRequest(_:)`` before anything is sent.
    ///   - transport: defaults to ``Transports/platformDefault``: AsyncHTTPClient on Linux,
    ///     URLSession on Apple platforms (one of its own when pins are configured).
    ///   - middlewares: run in order on the way out, in reverse on the way back, each where its
    ///     ``Middleware/scope`` says.
    ///   - configure: changes the ``Configuration`` from its defaults.
    public convenience init(
        baseURL: URL,
        transport: (any Transport)? = nil,
        middlewares: [any Middleware] = [],
        configure: (inout Configuration) -> Void = { _ in }
    ) {
        var configuration = Configuration()
        configure(&configuration)
        self.init(baseURL: baseURL, transport: transport, middlewares: middlewares, configuration: configuration)
    }

    /// Creates a client with a configuration made beforehand.
    public convenience init(
        baseURL: URL,
        transport: (any Transport)? = nil,
        middlewares: [any Middleware] = [],
        configuration: Configuration
    ) {
        let pinning = configuration.security.pinning
        let base = BaseURL.parse(baseURL)
        self.init(
            baseURL: baseURL,
            base: base,
            transport: transport ?? Transports.platformDefault(pinning: pinning, connectivity: configuration.connectivity),
            pinningConflict: Self.pinningConflict(pinning, transport: transport),
            authorizer: AccessTokenAuthorizer(settings: configuration.accessTokens, base: try? base.get()),
            resilience: ResilienceState(configuration.resilience, clock: configuration.clock, logger: configuration.logger),
            middlewares: middlewares,
            configuration: configuration
        )
    }

    private init(
        baseURL: URL,
        base: Result<BaseURL, TrellisError>,
        transport: any Transport,
        pinningConflict: TrellisError?,
        authorizer: AccessTokenAuthorizer,
        resilience: ResilienceState,
        middlewares: [any Middleware],
        configuration: Configuration
    ) {
        self.baseURL = baseURL
        self.base = base
        self.transport = transport
        self.pinningConflict = pinningConflict
        self.authorizer = authorizer
        self.resilience = resilience
        self.configuration = configuration
        var chain = middlewares
        let interceptors = configuration.interceptors
        if interceptors.beforeSending != nil || interceptors.onResponse != nil {
            chain.append(InterceptorMiddleware(
                beforeSending: interceptors.beforeSending,
                onResponse: interceptors.onResponse,
                maximumBodySize: configuration.limits.maximumBodySize
            ))
        }
        self.middlewares = chain
        let reference = ClientReference()
        self.pipeline = Pipeline(
            Pipeline.Settings(
                middlewares: chain,
                configuration: configuration,
                authorizer: authorizer,
                client: reference,
                pinningConflict: pinningConflict,
                transport: transport,
                resilience: resilience
            )
        )
        reference.client = self
    }

    /// A client like this one with `extra` run after its own middlewares, sharing its
    /// transport (and so its connections), its token storage and refreshes, and its settings.
    /// A service derives its client this way for its interceptors.
    public func adding(middlewares extra: [any Middleware]) -> Client {
        guard !extra.isEmpty else { return self }
        return Client(
            baseURL: baseURL,
            base: base,
            transport: transport,
            pinningConflict: pinningConflict,
            authorizer: authorizer,
            resilience: resilience,
            // The interceptors are already a middleware of ours, so they are not added twice.
            middlewares: middlewares + extra,
            configuration: { var plain = configuration; plain.interceptors = .init(); return plain }()
        )
    }

    // MARK: Streaming

    /// Sends a request through the pipeline and returns the response as it arrives, whatever
    /// its status, with the body still to be read.
    ///
    /// The timeout covers the time until the response head arrives; the body then fails with
    /// ``TrellisError/timedOut(_:)`` when no byte comes for the idle timeout while it is read.
    /// The other methods buffer, validate and decode.
    public func send(_ request: Request) async throws -> Response<ResponseBody> {
        try await pipeline.send(request)
    }

    private static func pinningConflict(_ pinning: CertificatePinning?, transport: (any Transport)?) -> TrellisError? {
        // A transport of your own checks (or mocks) what it will.
        guard let pinning, let transport, transport.checksPins, transport.pinning != pinning else { return nil }
        return TrellisError.invalidRequest(InvalidRequest(
            .url,
            "the client's pins are not the transport's: make the transport with the same pinning, or pass no transport"
        ))
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
    public func data(for request: Request, accepting extraAcceptedStatuses: Set<Int> = []) async throws -> Response<Data> {
        let buffered = try await buffered(request, accepting: extraAcceptedStatuses)
        return buffered.withBody(Data(buffer: buffered.body, byteTransferStrategy: .noCopy))
    }

    /// Sends a request and decodes the body as `type`.
    ///
    /// `Data` gets the raw bytes, `String` the text, and an `Optional` is `nil` for 204, 404 or
    /// an empty body. Any other `Decodable` is decoded as JSON with ``decoder``.
    public func value<Value: Decodable>(for request: Request, as type: Value.Type = Value.self) async throws -> Value {
        // Looked up once per call: a conformance check is a search of the runtime's tables.
        let optional = Value.self as? any OptionalDecodable.Type
        let buffered = try await buffered(request, accepting: optional != nil ? [404] : [])
        return try decodeBody(buffered, as: Value.self, optional: optional)
    }

    /// Sends a request and returns the status and headers with the decoded body.
    public func response<Value: Decodable>(for request: Request, as type: Value.Type = Value.self) async throws -> Response<Value> {
        let optional = Value.self as? any OptionalDecodable.Type
        let buffered = try await buffered(request, accepting: optional != nil ? [404] : [])
        return buffered.withBody(try decodeBody(buffered, as: Value.self, optional: optional))
    }

    /// Sends a request and makes a ``Parsable`` value of the body with its `parseData(_:)`.
    public func value<Value: Parsable>(for request: Request, as type: Value.Type = Value.self) async throws -> Value {
        try await response(for: request, as: type).body
    }

    /// A type that is both ``Parsable`` and `Decodable` is made by `parseData(_:)`: adopting
    /// `Parsable` asks for it.
    public func value<Value: Decodable & Parsable>(for request: Request, as type: Value.Type = Value.self) async throws -> Value {
        try await response(for: request, as: type).body
    }

    /// Sends a request and returns the status and headers with the body made by the type's
    /// `parseData(_:)`.
    public func response<Value: Parsable>(for request: Request, as type: Value.Type = Value.self) async throws -> Response<Value> {
        try await parsed(request, as: type)
    }

    /// A type that is both ``Parsable`` and `Decodable` is made by `parseData(_:)`.
    public func response<Value: Decodable & Parsable>(for request: Request, as type: Value.Type = Value.self) async throws -> Response<Value> {
        try await parsed(request, as: type)
    }

    private func parsed<Value: Parsable>(_ request: Request, as type: Value.Type) async throws -> Response<Value> {
        let buffered = try await buffered(request, accepting: [])
        let data = Data(buffer: buffered.body, byteTransferStrategy: .noCopy)
        do {
            return buffered.withBody(try Value.parseData(data))
        } catch {
            throw TrellisError.decodingFailed(DecodingFailure(type: Value.self, error: error, status: buffered.status, body: data))
        }
    }

    /// Sends a request and returns its status and headers; the body, if any, is read and
    /// dropped.
    public func response(for request: Request) async throws -> Response<Void> {
        Response(head: try await buffered(request, accepting: []).head)
    }

    /// Sends a request for its effect alone.
    public func perform(_ request: Request) async throws {
        _ = try await buffered(request, accepting: [])
    }

    private func buffered(_ request: Request, accepting extraStatuses: Set<Int>) async throws -> Response<ByteBuffer> {
        let response = try await pipeline.send(request, bufferLimit: maximumBodySize)
        // The transport read the body within the deadline: it is in memory already.
        let buffered = response.withBody(try await response.body.collect(upTo: maximumBodySize))
        let code = buffered.status.code
        let accepted = (request.acceptedStatuses ?? configuration.validation.acceptedStatuses).contains(code)
        guard accepted || extraStatuses.contains(code) else {
            throw statusFailure(buffered, for: request)
        }
        if code == 206, request.headerFields[.range] == nil {
            // Part of a body, for a request that asked for all of it, is not the answer.
            throw statusFailure(buffered, for: request)
        }
        return buffered
    }

    func statusFailure(_ response: Response<ByteBuffer>, for request: Request) -> TrellisError {
        TrellisError.unacceptableStatus(
            HTTPStatusFailure(
                status: response.status,
                headerFields: response.headerFields,
                body: Data(buffer: response.body),
                request: RequestLog.summary(request),
                idempotencyKey: response.sentIdempotencyKey,
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

    private func decodeBody<Value: Decodable>(
        _ response: Response<ByteBuffer>,
        as type: Value.Type,
        optional: (any OptionalDecodable.Type)?
    ) throws -> Value {
        if let special = SpecialBody.decode(Value.self, optional: optional, from: response) { return special }
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
    /// - Parameter optional: `Value` as an `Optional`, when it is one.
    static func decode<Value>(_ type: Value.Type, optional: (any OptionalDecodable.Type)?, from response: Response<ByteBuffer>) -> Value? {
        if let optional {
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
