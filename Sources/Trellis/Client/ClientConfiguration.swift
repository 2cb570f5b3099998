public import Foundation
public import HTTPTypes
public import Logging

extension Client {
    /// Everything a ``Client`` can be told, grouped by concern, the way AsyncHTTPClient's
    /// `HTTPClient.Configuration` is.
    ///
    /// ```swift
    /// let client = Client(baseURL: url) {
    ///     $0.retry = .standard
    ///     $0.timeouts.request = .seconds(20)
    ///     $0.security.plainHTTP = .refused
    /// }
    /// ```
    public struct Configuration: Sendable {
        /// How long requests may take.
        public var timeouts = Timeouts()
        /// How much of a response is read into memory.
        public var limits = Limits()
        /// The JSON coders.
        public var coding = Coding()
        /// When a failed request is sent again; none by default. A request's own
        /// ``Request/retryPolicy`` wins.
        public var retry: RetryPolicy = .none
        /// How redirects are followed.
        public var redirects: RedirectPolicy = .follow
        /// How access tokens are stored, sent and refreshed.
        public var accessTokens = AccessTokenSettings()
        /// Plain-HTTP refusal and certificate pinning.
        public var security = Security()
        /// Which responses a buffered call accepts, and the checks around each call.
        public var validation = Validation()
        /// Snowdrop's interceptors, run after the middlewares.
        public var interceptors = Interceptors()
        /// Where requests and responses are logged, at debug level, with credentials redacted.
        public var logger = Logger(label: "Trellis")
        /// Tracing, metrics and event monitors; by default, whatever the process bootstrapped.
        public var observability = Observability()
        /// Header fields added to every request (wheel's `commonHeaders`): a field the request
        /// already has keeps the request's value.
        public var defaultHeaders: HTTPFields = [:]
        /// Where cookies are kept: a jar of this configuration's own, in memory, unless you
        /// give one to share or one kept in a file (``CookieJar/init(persistingTo:)``); `nil`
        /// keeps and sends no cookies.
        public var cookies: CookieJar? = CookieJar()
        /// Compressed responses (asked for and decoded, with a bomb's ratio refused).
        public var compression = Compression()
        /// Where responses are cached (RFC 9111); `nil`, the default, caches nothing.
        public var cache: HTTPCache?
        /// How servers are reached: proxies, name overrides, TLS trust and the client's
        /// certificate, and connection settings. Direct, with system trust, by default.
        public var connectivity = Connectivity()
        /// Policies that span calls to an origin: a retry budget, a circuit breaker, a
        /// concurrency limit, shared backoff, hedging and coalescing. None by default.
        public var resilience = Resilience()
        /// Which calls carry an idempotency key without one of their own (``IdempotencyKey-swift.struct``):
        /// `nil`, the default, keys only the requests and endpoints that ask for one; settings
        /// key every call of their methods (`POST` and `PATCH`), which retries, hedges and
        /// resends then treat as safe to send again.
        public var idempotencyKeys: IdempotencyKeySettings?
        /// The time the client reads and waits on, for every policy that keeps time: retries'
        /// waits, the breaker, the shared pause, the concurrency limit, hedging and the cache's
        /// ages. A test sets `TrellisTesting`'s `ManualClock` to move it by hand.
        public var clock: any ClientClock = SystemClock()

        /// The defaults: a 60-second request and idle timeout, 64 MiB bodies, no retries, ten
        /// redirects, and plain HTTP allowed.
        public init() {}
    }
}

extension Client.Configuration {
    /// How long requests may take.
    public struct Timeouts: Sendable {
        /// How long a request may take, from sending to the last byte of a buffered response
        /// or the head of a streamed one, per attempt, unless the request sets its own
        /// (``Request/timeout``, which a middleware or an endpoint's `@Timeout` may set).
        public var request: Duration = .seconds(60)
        /// How long a streamed body (a download, an event stream) may go without a byte while
        /// it is being read before it fails with ``TrellisError/timedOut(_:)``.
        public var idle: Duration = .seconds(60)

        /// Timeouts of `request` for each attempt and `idle` between a streamed body's bytes; both
        /// 60 seconds by default.
        public init(request: Duration = .seconds(60), idle: Duration = .seconds(60)) {
            self.request = request
            self.idle = idle
        }
    }

    /// How much of a response is read into memory.
    public struct Limits: Sendable {
        /// The largest response body a buffered call reads into memory; streamed downloads and
        /// events are not bound by it.
        public var maximumBodySize: Int = Client.defaultMaximumBodySize
        /// The largest server-sent event (its data, type and any one line) an event stream
        /// accepts; 1 MiB by default.
        public var maximumEventSize: Int = 1024 * 1024

        /// Limits of `maximumBodySize` bytes for a buffered body (64 MiB by default) and
        /// `maximumEventSize` bytes for one server-sent event (1 MiB).
        public init(maximumBodySize: Int = Client.defaultMaximumBodySize, maximumEventSize: Int = 1024 * 1024) {
            self.maximumBodySize = maximumBodySize
            self.maximumEventSize = maximumEventSize
        }
    }

    /// The JSON coders.
    public struct Coding: Sendable {
        /// Encodes JSON request bodies.
        public var encoder: JSONEncoder
        /// Decodes JSON response bodies.
        public var decoder: JSONDecoder

        /// The coders of request bodies and decoded responses; Foundation's defaults unless given.
        public init(encoder: JSONEncoder = JSONEncoder(), decoder: JSONDecoder = JSONDecoder()) {
            self.encoder = encoder
            self.decoder = decoder
        }
    }

    /// Plain-HTTP refusal and certificate pinning.
    public struct Security: Sendable {
        /// Whether plain `http://` requests may be sent (by default they may).
        public var plainHTTP: PlainHTTPPolicy = .allowed
        /// The certificates and keys pinned per host. Without a transport, the client makes a
        /// platform default transport of its own that checks them; a transport you pass must be
        /// made with the same pins, or every request fails with
        /// ``TrellisError/invalidRequest(_:)``.
        public var pinning: CertificatePinning?

        /// A plain-HTTP rule (allowed by default) and pins (none by default).
        public init(plainHTTP: PlainHTTPPolicy = .allowed, pinning: CertificatePinning? = nil) {
            self.plainHTTP = plainHTTP
            self.pinning = pinning
        }
    }

    /// Which responses a buffered call accepts, and the checks around each call.
    public struct Validation: Sendable {
        /// The statuses buffered calls accept; 200...299 by default.
        public var acceptedStatuses: Set<Int> = Set(200...299)
        /// Checks made before each request; a failing one means nothing is sent.
        public var preconditions: [RequestPrecondition] = []
        /// Checks of each buffered response whose status was accepted; a failing one becomes
        /// the call's error.
        public var validations: [ResponseValidation] = []

        /// The statuses accepted besides 2xx, and the checks before sending and after the answer;
        /// none by default.
        public init(
            acceptedStatuses: Set<Int> = Set(200...299),
            preconditions: [RequestPrecondition] = [],
            validations: [ResponseValidation] = []
        ) {
            self.acceptedStatuses = acceptedStatuses
            self.preconditions = preconditions
            self.validations = validations
        }
    }

    /// Snowdrop's interceptors: conveniences that become one middleware after the client's.
    public struct Interceptors: Sendable {
        /// Rewrites or rejects each request before it is sent.
        public var beforeSending: BeforeSending?
        /// Sees each response first, with its body in memory.
        public var onResponse: OnResponse?

        /// The closures that see each request before it is sent and each response as it comes back;
        /// none by default.
        public init(beforeSending: BeforeSending? = nil, onResponse: OnResponse? = nil) {
            self.beforeSending = beforeSending
            self.onResponse = onResponse
        }
    }
}
