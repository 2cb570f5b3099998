public import Foundation

/// One cookie as a ``CookieJar`` keeps it (RFC 6265 section 5.3): what a server set with
/// `Set-Cookie`, scoped to the domain and path it may be sent to.
public struct Cookie: Sendable, Hashable, Codable {
    /// How a cookie may be sent along with requests from other sites, as the server asked.
    /// An HTTP client has no notion of a site making a request, so Trellis keeps it for you to
    /// read and sends every matching cookie.
    public enum SameSite: String, Sendable, Hashable, Codable {
        /// `SameSite=Strict`.
        case strict = "Strict"
        /// `SameSite=Lax`.
        case lax = "Lax"
        /// `SameSite=None` (named so that it cannot be mistaken for a missing attribute).
        case unrestricted = "None"
    }

    /// The cookie's name.
    public var name: String
    /// The cookie's value, as the server sent it.
    public var value: String
    /// The host the cookie came from (``isHostOnly``) or the domain it names, lowercased,
    /// without a leading dot.
    public var domain: String
    /// Whether the cookie goes to ``domain`` alone (no `Domain` attribute) rather than to its
    /// subdomains too.
    public var isHostOnly: Bool
    /// The path the cookie is sent under, and below.
    public var path: String
    /// When the cookie expires; `nil` for a session cookie, kept until the jar goes away (and
    /// never written to a jar's file).
    public var expiresAt: Date?
    /// Whether the cookie is sent over `https` (and `wss`) alone.
    public var isSecure: Bool
    /// Whether the server marked it `HttpOnly` (hidden from scripts, which a client has none of).
    public var isHTTPOnly: Bool
    /// The `SameSite` attribute, when the server gave one.
    public var sameSite: SameSite?
    /// When the cookie was first set, which orders cookies of equal path in a `Cookie` header.
    public var createdAt: Date

    /// Creates a cookie; a server's cookies come from ``CookieJar`` parsing `Set-Cookie`.
    public init(
        name: String,
        value: String,
        domain: String,
        isHostOnly: Bool = true,
        path: String = "/",
        expiresAt: Date? = nil,
        isSecure: Bool = false,
        isHTTPOnly: Bool = false,
        sameSite: SameSite? = nil,
        createdAt: Date = Date()
    ) {
        self.name = name
        self.value = value
        self.domain = domain.lowercased()
        self.isHostOnly = isHostOnly
        self.path = path
        self.expiresAt = expiresAt
        self.isSecure = isSecure
        self.isHTTPOnly = isHTTPOnly
        self.sameSite = sameSite
        self.createdAt = createdAt
    }

    /// Whether the cookie has expired at `now`.
    public func isExpired(at now: Date = Date()) -> Bool {
        expiresAt.map { $0 <= now } ?? false
    }

    /// Whether the cookie goes with a request to `host` (lowercased, without brackets or port)
    /// for `path` over a secure scheme or not (RFC 6265 section 5.4).
    func matches(host: String, path requestPath: String, secure: Bool) -> Bool {
        if isSecure && !secure { return false }
        if isHostOnly {
            guard host == domain else { return false }
        } else {
            guard CookieDomain.domainMatches(host: host, domain: domain) else { return false }
        }
        return CookieDomain.pathMatches(requestPath: requestPath, cookiePath: path)
    }

    /// The identity a new cookie replaces an old one by (RFC 6265 section 5.3, step 11).
    var key: Key { Key(name: name, domain: domain, isHostOnly: isHostOnly, path: path) }

    struct Key: Hashable {
        let name: String
        let domain: String
        let isHostOnly: Bool
        let path: String
    }
}

/// Domain and path matching (RFC 6265 sections 5.1.3 and 5.1.4).
enum CookieDomain {
    static func domainMatches(host: String, domain: String) -> Bool {
        if host == domain { return true }
        // An IP address matches itself alone; a name matches its parent domains.
        guard !CanonicalHost.isIPAddress(host) else { return false }
        return host.hasSuffix("." + domain)
    }

    static func pathMatches(requestPath: String, cookiePath: String) -> Bool {
        if requestPath == cookiePath { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        if cookiePath.hasSuffix("/") { return true }
        return requestPath.dropFirst(cookiePath.count).first == "/"
    }

    /// The directory of a request path, where a cookie without `Path` applies.
    static func defaultPath(of requestPath: String) -> String {
        guard requestPath.hasPrefix("/"), let lastSlash = requestPath.lastIndex(of: "/"), lastSlash != requestPath.startIndex else {
            return "/"
        }
        return String(requestPath[..<lastSlash])
    }

}
