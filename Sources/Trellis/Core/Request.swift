public import Foundation
public import HTTPTypes

/// One HTTP request as it travels through a ``Client``'s middleware chain to its ``Transport``.
///
/// The head is a swift-http-types `HTTPRequest`, the currency type of server-side Swift, so a
/// middleware written for Trellis reads the same as one written for Hummingbird or OpenAPI.
public struct Request: Sendable {
    /// Method, scheme, authority, path (with query) and header fields.
    public var head: HTTPRequest
    /// The body, if any. A replayable body (data, file) can be sent again by a retry or a
    /// token refresh; a one-shot stream cannot.
    public var body: RequestBody?
    /// The time this request may take, from sending to the last byte of a buffered response.
    /// `nil` uses the client's ``Client/timeout``.
    public var timeout: Duration?
    /// The path template of the endpoint this request came from (`/posts/{id}`), kept so that
    /// logs and metrics can group requests by endpoint without their values.
    public var pathTemplate: String?
    /// The name spans, metrics, debug logs and event monitors give the endpoint, in place of
    /// the method and ``pathTemplate``: the operation ID of a request from an OpenAPI client
    /// (TrellisOpenAPI sets it), or a name of your own.
    public var endpointName: String?
    /// Whether the request carries an access token, and which: the client adds
    /// `Authorization` from its token storage and refreshes the token when the server refuses
    /// it. `nil` sends the request as it is.
    public var accessToken: AccessTokenRequirement?
    /// How this request is retried; `nil` uses the client's ``Client/retryPolicy``.
    public var retryPolicy: RetryPolicy?
    /// How many times this request may be sent again, replacing the count of the retry policy
    /// that applies (the request's own, else the client's) and keeping its waits and statuses;
    /// `nil` keeps the policy's count. A negative count is taken as 0.
    public var maximumRetries: Int? {
        didSet { if let count = maximumRetries, count < 0 { maximumRetries = 0 } }
    }
    /// The statuses a buffered call accepts; `nil` uses the client's
    /// ``Client/acceptedStatuses`` (2xx).
    public var acceptedStatuses: Set<Int>?
    /// Whether the body is sent compressed with gzip (`Content-Encoding: gzip`), for servers
    /// that accept it; off by default, since many do not.
    public var compressesBody = false
    /// How this request uses the client's ``HTTPCache``; `nil` follows HTTP's rules
    /// (``CachePolicy/useCache``).
    public var cachePolicy: CachePolicy?
    /// Checks made before this request is sent, after the client's.
    public var preconditions: [RequestPrecondition] = []
    /// Checks of this request's buffered response, after the client's.
    public var validations: [ResponseValidation] = []
    /// The key this call sends in `Idempotency-Key` on every attempt, which makes it safe to
    /// send again (``IdempotencyKey-swift.struct``); `nil` keys it only when the client keys its method
    /// (``Client/Configuration-swift.struct/idempotencyKeys``).
    public var idempotencyKey: IdempotencyKey?
    /// The key the call's ``IdempotencyKeyStage`` drew and sends; set below that stage only.
    var sentIdempotencyKey: String?
    /// Query parameter names whose values logs, events and errors redact, beyond the
    /// well-known ones (`access_token`, `api_key`, ...). An ``APIKey`` sent in a query
    /// parameter adds its name.
    public var redactedQueryNames: Set<String> = []

    /// Creates a request for an absolute URL.
    ///
    /// A `ws://` or `wss://` URL (for ``Client/webSocket(for:settings:)``) is kept as the
    /// `http://` or `https://` URL its upgrade request is sent to.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when the URL is not an absolute `http`,
    ///   `https`, `ws` or `wss` URL with a host.
    public init(
        method: HTTPRequest.Method,
        url: URL,
        headerFields: HTTPFields = [:],
        body: RequestBody? = nil,
        timeout: Duration? = nil
    ) throws {
        let target = try RequestTarget(url, acceptingWebSocketSchemes: true)
        self.init(
            head: HTTPRequest(
                method: method,
                scheme: target.scheme,
                authority: target.authority,
                path: target.pathAndQuery,
                headerFields: headerFields
            ),
            body: body,
            timeout: timeout
        )
    }

    /// Creates a request whose method is given as text, for methods not known in advance.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming the method when it is not a valid
    ///   HTTP token (RFC 9110 section 9.1).
    public init(
        method: String,
        url: URL,
        headerFields: HTTPFields = [:],
        body: RequestBody? = nil,
        timeout: Duration? = nil
    ) throws {
        guard let parsed = HTTPRequest.Method(method) else {
            throw TrellisError.invalidRequest(.init(.method, "\"\(method)\" is not a valid HTTP method token"))
        }
        try self.init(method: parsed, url: url, headerFields: headerFields, body: body, timeout: timeout)
    }

    /// Creates a request from a complete head.
    public init(head: HTTPRequest, body: RequestBody? = nil, timeout: Duration? = nil, pathTemplate: String? = nil) {
        self.head = head
        self.body = body
        self.timeout = timeout
        self.pathTemplate = pathTemplate
    }

    /// The request method.
    public var method: HTTPRequest.Method {
        get { head.method }
        set { head.method = newValue }
    }

    /// The header fields.
    public var headerFields: HTTPFields {
        get { head.headerFields }
        set { head.headerFields = newValue }
        // In place: with a setter alone, each change to a field copied all of them.
        _modify { yield &head.headerFields }
    }

    /// The absolute URL this request goes to, in the textual form transports send.
    public var urlString: String {
        (head.scheme ?? "https") + "://" + (head.authority ?? "") + (head.path ?? "/")
    }

    /// The absolute URL this request goes to.
    public var url: URL? { URL(string: urlString) }

    /// The host (without brackets) and the port the request goes to: the authority's port, or
    /// the scheme's (80 for `http`, 443 otherwise). Read from the text, not from a `URL`, which
    /// would cost allocations on every call that asks.
    var server: (host: String, port: Int) {
        let authority = head.authority ?? ""
        var port = head.scheme?.lowercased() == "http" ? 80 : 443
        // In `[v6]` without a port, what follows the last colon ends with `]`: no number.
        if let colon = authority.lastIndex(of: ":"), let explicit = Int(authority[authority.index(after: colon)...]) {
            port = explicit
        }
        return (PlainHTTPPolicy.host(of: authority), port)
    }

    /// `scheme://host:port`, the unit credentials are scoped to.
    var origin: String { Self.origin(scheme: head.scheme ?? "https", authority: head.authority ?? "") }

    /// Whether sending this request a second time cannot do harm: its method is idempotent, or
    /// it carries an idempotency key, and its body can be sent again. Retries, hedges and the
    /// replay of a stale connection ask.
    var canBeSentAgain: Bool {
        (method.isIdempotent || sentIdempotencyKey != nil) && (body?.isReplayable ?? true)
    }

    /// `scheme://host:port` with the port spelled out, so `https://a` and `https://a:443`
    /// are one origin.
    /// The origin of an absolute `http` or `https` URL; `nil` for any other.
    static func origin(of url: URL) -> String? {
        (try? RequestTarget(url)).map { origin(scheme: $0.scheme, authority: $0.authority) }
    }

    static func origin(scheme: String, authority: String) -> String {
        // Read as bytes throughout: resilience policies read an origin on every call, and
        // checks by `Character` (or Foundation's `contains`) cost several times more.
        let isUppercase = { (byte: UInt8) in byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }
        let scheme = scheme.utf8.contains(where: isUppercase) ? scheme.lowercased() : scheme
        let authority = authority.utf8.contains(where: isUppercase) ? authority.lowercased() : authority
        // An IPv6 literal's colons are inside its brackets; a port follows the closing one.
        let hasPort = authority.utf8.first == UInt8(ascii: "[")
            ? authority.utf8.last != UInt8(ascii: "]")
            : authority.utf8.contains(UInt8(ascii: ":"))
        let port = hasPort ? "" : scheme == "https" ? ":443" : ":80"
        return "\(scheme)://\(authority)\(port)"
    }

    /// Sets a header field from text, rejecting what would change the request's framing.
    ///
    /// swift-http-types silently turns CR, LF and NUL in a value into spaces; Trellis refuses
    /// them instead, because a value that needed them was not what the caller meant to send.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming the header when its name is not a
    ///   valid token or its value holds CR, LF or NUL.
    public mutating func setHeader(_ name: String, _ value: String) throws {
        head.headerFields[try Self.fieldName(name)] = try Self.checkedValue(value, for: name)
    }

    /// Adds a header field, keeping any earlier field of the same name.
    ///
    /// - Throws: as ``setHeader(_:_:)``.
    public mutating func addHeader(_ name: String, _ value: String) throws {
        head.headerFields.append(HTTPField(name: try Self.fieldName(name), value: try Self.checkedValue(value, for: name)))
    }

    /// The header fields as an HTTP/1 request carries them, for transports: swift-http-types
    /// keeps `Cookie` as one field per cookie (HTTP/2's crumbs), which HTTP/1 must send as one
    /// field, joined with "; " (RFC 6265 section 5.4), and a transport that folds repeated
    /// fields would join with "," instead.
    ///
    /// A request over a Unix domain socket carries `Host: localhost` unless it has a `Host` of
    /// its own, as curl's `--unix-socket` sends: HTTP/1.1 requires the field (RFC 9112
    /// section 3.2), nginx and Go's server answer 400 without it, and AsyncHTTPClient takes
    /// no host from a socket's path.
    func forEachWireField(_ body: (_ name: String, _ value: String) throws -> Void) rethrows {
        if head.scheme?.hasSuffix("+unix") == true, head.headerFields[Self.hostField] == nil {
            try body("Host", "localhost")
        }
        var cookies: [String] = []
        for field in head.headerFields {
            if field.name == .cookie {
                cookies.append(field.value)
            } else {
                try body(field.name.rawName, field.value)
            }
        }
        if !cookies.isEmpty { try body(HTTPField.Name.cookie.rawName, cookies.joined(separator: "; ")) }
    }

    private static let hostField = HTTPField.Name("Host")!

    /// The name a request over a Unix domain socket goes to: its `Host`, without a port, or
    /// `localhost` (what ``forEachWireField(_:)`` sends). Over `https+unix` the server's
    /// certificate must name it, as curl's `--unix-socket` checks the URL's host.
    var socketServerName: String {
        guard let host = head.headerFields[Self.hostField] else { return "localhost" }
        return PlainHTTPPolicy.host(of: host)
    }

    static func fieldName(_ name: String) throws -> HTTPField.Name {
        guard let fieldName = HTTPField.Name(name) else {
            throw TrellisError.invalidRequest(.init(.header(name), "\"\(name)\" is not a valid header field name"))
        }
        return fieldName
    }

    static func checkedValue(_ value: String, for name: String) throws -> String {
        guard HTTPField.isValidValue(value) else {
            throw TrellisError.invalidRequest(
                .init(.header(name), "the value of header \"\(name)\" contains CR, LF or NUL")
            )
        }
        return value
    }
}

/// The parts of an absolute URL that go into a request head.
struct RequestTarget {
    var scheme: String
    var authority: String
    var pathAndQuery: String

    init(_ url: URL, acceptingWebSocketSchemes: Bool = false) throws {
        guard var scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https" || (acceptingWebSocketSchemes && (scheme == "ws" || scheme == "wss"))
                || scheme == "http+unix" || scheme == "https+unix"
        else {
            throw TrellisError.invalidRequest(
                .init(.url, "\"\(url.absoluteString)\" is not an absolute http or https URL")
            )
        }
        if scheme.hasSuffix("+unix") {
            // The host is the socket's path, percent-encoded (`http+unix://%2Fvar%2Frun%2Fdocker.sock/_ping`),
            // as AsyncHTTPClient reads it.
            guard let socket = url.host(percentEncoded: true), !socket.isEmpty, socket.removingPercentEncoding?.hasPrefix("/") == true else {
                throw TrellisError.invalidRequest(.init(.url, "\"\(url.absoluteString)\" names no absolute socket path (percent-encode it: http+unix://%2Fvar%2Frun%2Fapp.sock/)"))
            }
            self.scheme = scheme
            self.authority = socket
            var path = url.path(percentEncoded: true)
            if path.isEmpty { path = "/" }
            if let query = url.query(percentEncoded: true) { path += "?" + query }
            self.pathAndQuery = path
            return
        }
        guard let host = url.host, !host.isEmpty else {
            throw TrellisError.invalidRequest(.init(.url, "\"\(url.absoluteString)\" has no host"))
        }
        if scheme == "ws" { scheme = "http" }
        if scheme == "wss" { scheme = "https" }
        self.scheme = scheme
        let bracketedHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        self.authority = url.port.map { "\(bracketedHost):\($0)" } ?? bracketedHost
        var path = url.path(percentEncoded: true)
        if path.isEmpty { path = "/" }
        if let query = url.query(percentEncoded: true) { path += "?" + query }
        self.pathAndQuery = path
    }
}

extension HTTPRequest.Method {
    /// Whether a request of this method may be sent twice with the same effect (RFC 9110
    /// section 9.2.2), which every retry, hedge and resend asks.
    var isIdempotent: Bool {
        // A switch, not `contains` on an array literal: every call asks, some twice.
        switch self {
        case .get, .head, .put, .delete, .options, .trace, .query: true
        default: false
        }
    }
}
