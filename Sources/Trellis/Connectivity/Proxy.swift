import Foundation

/// A proxy server that requests go through: an HTTP proxy, or a SOCKS5 one.
///
/// Over an HTTP proxy, `https://` and `wss://` requests go through a `CONNECT` tunnel to the
/// origin, so TLS (and certificate pinning) stays end to end with the origin and
/// `Proxy-Authorization` reaches the proxy alone. `http://` requests are forwarded: the
/// request line names the whole URL and the proxy makes the request (``tunnelsPlainHTTP``
/// tunnels them too). Over a SOCKS5 proxy, the proxy opens the TCP connection for the client.
///
/// ```swift
/// let client = Client(baseURL: url) {
///     $0.connectivity.proxy = .always(.http(host: "proxy.internal", port: 3128,
///                                           credentials: .init(username: "svc", password: secret)),
///                                     except: try NoProxy("localhost, .internal"))
/// }
/// ```
public struct Proxy: Sendable, Hashable, CustomStringConvertible {
    /// What kind of proxy it is.
    public enum Kind: String, Sendable, Hashable {
        /// An HTTP proxy: `CONNECT` for `https://` and `wss://`, forwarding for `http://`.
        case http
        /// A SOCKS5 proxy (RFC 1928), without authentication.
        case socks5
    }

    /// A user name and password for an HTTP proxy, sent as `Proxy-Authorization: Basic`.
    public struct Credentials: Sendable, Hashable, CustomStringConvertible {
        /// The user name.
        public var username: String
        /// The password.
        public var password: String

        /// Credentials of `username` and `password`.
        public init(username: String, password: String) {
            self.username = username
            self.password = password
        }

        /// The user name alone: a password never appears in a description, log or error.
        public var description: String { "\(username):<redacted>" }

        /// The value of a `Proxy-Authorization` field carrying them.
        var basicAuthorization: String {
            "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
        }
    }

    /// What kind of proxy it is.
    public var kind: Kind
    /// The proxy's host name or address.
    public var host: String
    /// The proxy's port.
    public var port: Int
    /// The credentials sent to an HTTP proxy with every `CONNECT` and forwarded request, if any.
    public var credentials: Credentials?
    /// Whether an HTTP proxy gets `http://` requests through a `CONNECT` tunnel too (curl's
    /// `--proxytunnel`, AsyncHTTPClient's only way), instead of forwarded; `false` by default.
    ///
    /// Forwarding works with every HTTP proxy, where many allow `CONNECT` to port 443 alone;
    /// a tunnel keeps a connection to the origin open for the next request, where Trellis opens
    /// a connection to the proxy for each forwarded one.
    public var tunnelsPlainHTTP = false

    /// An HTTP proxy at `host` and `port`, sent `credentials` with every request when given;
    /// `tunnelsPlainHTTP` sends `http://` requests through `CONNECT` too.
    public static func http(host: String, port: Int, credentials: Credentials? = nil, tunnelsPlainHTTP: Bool = false) -> Proxy {
        var proxy = Proxy(kind: .http, host: host, port: port, credentials: credentials)
        proxy.tunnelsPlainHTTP = tunnelsPlainHTTP
        return proxy
    }

    /// A SOCKS5 proxy at `host` and `port`.
    public static func socks5(host: String, port: Int) -> Proxy {
        Proxy(kind: .socks5, host: host, port: port, credentials: nil)
    }

    /// The proxy a URL names, as curl reads one: `http://[user:password@]host[:port]`
    /// (port 1080 unless given, as curl's default), `socks5://host[:port]` or
    /// `socks5h://host[:port]` (port 1080), or a bare `host:port`, read as `http://`.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming the value, with any password in it
    ///   redacted, when it is not such a URL.
    public init(url text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let withScheme = trimmed.contains("://") ? trimmed : "http://" + trimmed
        guard let components = URLComponents(string: withScheme), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else {
            throw Self.invalid(text, "is not a proxy URL (such as http://proxy.example.com:3128)")
        }
        switch scheme {
        case "http":
            kind = .http
        case "socks5", "socks5h":
            kind = .socks5
        default:
            throw Self.invalid(text, "names the scheme \"\(scheme)\"; a proxy is http://, socks5:// or socks5h://")
        }
        if let path = components.percentEncodedPath.nilIfEmpty, path != "/" {
            throw Self.invalid(text, "has a path; a proxy URL is a scheme, a host and a port")
        }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        self.port = components.port ?? 1080
        guard (1...65535).contains(port) else { throw Self.invalid(text, "has a port outside 1...65535") }
        if let user = components.user?.removingPercentEncoding, !user.isEmpty {
            guard kind == .http else { throw Self.invalid(text, "has credentials; Trellis sends credentials to HTTP proxies only") }
            credentials = Credentials(username: user, password: components.password?.removingPercentEncoding ?? "")
        } else {
            credentials = nil
        }
    }

    private init(kind: Kind, host: String, port: Int, credentials: Credentials?) {
        self.kind = kind
        self.host = host
        self.port = port
        self.credentials = credentials
    }

    /// The proxy's URL, its password redacted.
    public var description: String {
        let user = credentials.map { "\($0.username):<redacted>@" } ?? ""
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return "\(kind.rawValue)://\(user)\(bracketed):\(port)"
    }

    static func invalid(_ value: String, _ problem: String, variable: String? = nil) -> TrellisError {
        let shown = redactingPassword(value)
        let subject = variable.map { "\($0) (\"\(shown)\")" } ?? "the proxy \"\(shown)\""
        return .invalidRequest(.init(.url, "\(subject) \(problem)"))
    }

    /// `value` with the password of any `user:password@` in it replaced.
    static func redactingPassword(_ value: String) -> String {
        guard let at = value.lastIndex(of: "@") else { return value }
        let start = value.range(of: "://")?.upperBound ?? value.startIndex
        guard let colon = value[start..<at].firstIndex(of: ":") else { return value }
        return value[..<value.index(after: colon)] + "<redacted>" + value[at...]
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
