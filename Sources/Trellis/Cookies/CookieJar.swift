public import Foundation
import NIOConcurrencyHelpers

/// The cookies a ``Client`` keeps (RFC 6265): stored from every `Set-Cookie` a response
/// carries, sent in `Cookie` with every request whose host, path and scheme they match.
///
/// Each client has an in-memory jar by default (``Client/Configuration/cookies``); give it
/// `nil` to keep no cookies, or a jar made with ``init(persistingTo:)`` to keep them across
/// launches. Several clients may share one jar.
///
/// A server cannot make the jar grow without bound: a cookie's name and value are limited to
/// 4096 bytes, a domain to ``maximumCookiesPerDomain`` cookies and the jar to
/// ``maximumCookies``, the oldest going first.
public final class CookieJar: Sendable {
    /// The most cookies kept for one domain.
    public static let maximumCookiesPerDomain = 50
    /// The most cookies kept in all.
    public static let maximumCookies = 3000

    private let state = NIOLockedValueBox(State())
    private let file: PersistentFile?

    private struct State {
        var cookies: [Cookie] = []
        /// Counts changes, so that a write of an older snapshot never replaces a newer one.
        var version = 0
    }

    /// An empty jar in memory.
    public init() {
        self.file = nil
    }

    /// A jar kept in the file at `fileURL`, loaded now (a missing file is an empty jar) and
    /// written again after every change: to a new file readable by its owner alone (0600),
    /// then renamed over the old one, so that a crash leaves the old jar or the new one, never
    /// part of one. Session cookies (without `Expires` or `Max-Age`) are not written.
    ///
    /// A cookie in the file for a public suffix (`co.uk`), which a version of Trellis before
    /// that check may have kept, is dropped as the jar loads.
    ///
    /// - Throws: ``TrellisError/fileFailed(_:)`` when the file exists but cannot be read or is
    ///   not a jar.
    public init(persistingTo fileURL: URL) throws {
        let file = PersistentFile(path: fileURL.path)
        self.file = file
        let loaded = try file.load()
        let now = Date()
        state.withLockedValue { state in
            state.cookies = loaded.filter { cookie in
                !cookie.isExpired(at: now) && (cookie.isHostOnly || !PublicSuffixes.list.contains(cookie.domain))
            }
        }
    }

    /// Every cookie that has not expired.
    public var cookies: [Cookie] {
        let now = Date()
        return state.withLockedValue { $0.cookies.filter { !$0.isExpired(at: now) } }
    }

    /// The cookies a request to `url` would carry, in the order it would send them.
    public func cookies(for url: URL) -> [Cookie] {
        guard let scope = try? CookieScope(url: url) else { return [] }
        return matching(scope, at: Date())
    }

    /// Adds `cookie`, replacing one of the same name, domain and path.
    public func add(_ cookie: Cookie) {
        let now = Date()
        change { cookies in Self.insert(cookie, into: &cookies, at: now) }
    }

    /// Stores the cookie of one `Set-Cookie` field value as if a response from `url` had
    /// carried it (a cookie obtained elsewhere, a login made in a web view), with the same
    /// checks.
    ///
    /// - Returns: `false` when the cookie is refused (malformed, too large, for another
    ///   domain, `Secure` from a plain `http` URL, or `url` is not an http or https URL).
    @discardableResult
    public func add(setCookie field: String, from url: URL) -> Bool {
        guard let scope = try? CookieScope(url: url) else { return false }
        return store([field], from: scope, at: Date()).isEmpty
    }

    /// Removes every cookie.
    public func removeAll() {
        change { $0.removeAll() }
    }

    // MARK: For the pipeline, at the time of the client's clock

    /// The `Cookie` field value for a request in `scope` at `now`, or `nil` when no cookie
    /// matches.
    func cookieHeader(for scope: CookieScope, at now: Date) -> String? {
        let matched = matching(scope, at: now)
        guard !matched.isEmpty else { return nil }
        return matched.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// Stores the cookies of a response's `Set-Cookie` fields received at `now` (their
    /// `Max-Age` counts from then), and returns why any were refused.
    @discardableResult
    func store(_ fields: [String], from scope: CookieScope, at now: Date) -> [String] {
        var refusals: [String] = []
        var accepted: [Cookie] = []
        for field in fields {
            switch SetCookieParser.parse(field, from: scope.origin, now: now) {
            case .accepted(let cookie): accepted.append(cookie)
            case .refused(let reason): refusals.append(reason)
            }
        }
        if !accepted.isEmpty {
            change { cookies in
                for cookie in accepted {
                    if !scope.origin.secure, Self.wouldOverwriteASecureCookie(cookie, in: cookies) {
                        refusals.append("it would replace a Secure cookie of the same name, and came over plain HTTP")
                    } else if cookie.isExpired(at: now) {
                        // Max-Age=0 or a past Expires: the server deletes the cookie.
                        cookies.removeAll { $0.key == cookie.key }
                    } else {
                        Self.insert(cookie, into: &cookies, at: now)
                    }
                }
            }
        }
        return refusals
    }

    var isEmpty: Bool { state.withLockedValue { $0.cookies.isEmpty } }

    /// Whether a cookie from a plain-HTTP response would set, shadow or delete a `Secure` one:
    /// same name, domains that match either way, and a path within the Secure cookie's
    /// (RFC 6265bis section 5.7, step 16). A network attacker could otherwise replace a
    /// session cookie that only ever travels over HTTPS.
    private static func wouldOverwriteASecureCookie(_ cookie: Cookie, in cookies: [Cookie]) -> Bool {
        cookies.contains { existing in
            existing.isSecure && existing.name == cookie.name
                && (CookieDomain.domainMatches(host: existing.domain, domain: cookie.domain)
                    || CookieDomain.domainMatches(host: cookie.domain, domain: existing.domain))
                && CookieDomain.pathMatches(requestPath: cookie.path, cookiePath: existing.path)
        }
    }

    private func matching(_ scope: CookieScope, at now: Date) -> [Cookie] {
        let matched = state.withLockedValue { state in
            state.cookies.enumerated().filter { !$0.element.isExpired(at: now) && $0.element.matches(host: scope.origin.host, path: scope.origin.path, secure: scope.origin.secure) }
        }
        // Longer paths first, then older cookies first (RFC 6265 section 5.4); cookies set by
        // one response share a time and keep the order it gave them.
        return matched.sorted { left, right in
            if left.element.path.count != right.element.path.count { return left.element.path.count > right.element.path.count }
            if left.element.createdAt != right.element.createdAt { return left.element.createdAt < right.element.createdAt }
            return left.offset < right.offset
        }.map(\.element)
    }

    private static func insert(_ cookie: Cookie, into cookies: inout [Cookie], at now: Date) {
        var cookie = cookie
        if let index = cookies.firstIndex(where: { $0.key == cookie.key }) {
            cookie.createdAt = cookies[index].createdAt
            cookies.remove(at: index)
        }
        cookies.append(cookie)
        cookies.removeAll { $0.isExpired(at: now) }
        // The oldest go first: a cookie appended last is the most recently set.
        let sameDomain = cookies.indices.filter { cookies[$0].domain == cookie.domain }
        if sameDomain.count > maximumCookiesPerDomain {
            let excess = Set(sameDomain.prefix(sameDomain.count - maximumCookiesPerDomain))
            cookies = cookies.enumerated().filter { !excess.contains($0.offset) }.map(\.element)
        }
        if cookies.count > maximumCookies {
            cookies.removeFirst(cookies.count - maximumCookies)
        }
    }

    private func change(_ body: (inout [Cookie]) -> Void) {
        let snapshot = state.withLockedValue { state in
            body(&state.cookies)
            state.version += 1
            return (state.cookies, state.version)
        }
        file?.save(snapshot.0, version: snapshot.1)
    }
}

/// Where a request goes, as cookies see it: host, path and whether the scheme is secure.
struct CookieScope {
    let origin: SetCookieParser.Origin

    init(request: Request) {
        let scheme = request.head.scheme?.lowercased() ?? "https"
        let authority = request.head.authority ?? ""
        let host = CanonicalHost.form(PlainHTTPPolicy.host(of: authority))
        var path = request.head.path ?? "/"
        if let query = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = String(path[..<query]) }
        if path.isEmpty { path = "/" }
        origin = .init(host: host, path: path, secure: scheme == "https" || scheme == "wss")
    }

    init(url: URL) throws {
        self.init(request: try Request(method: .get, url: url))
    }
}

/// The jar's file: loaded once, then replaced whole after each change.
private final class PersistentFile: Sendable {
    let path: String
    private let written = NIOLockedValueBox(0)

    init(path: String) {
        self.path = path
    }

    func load() throws -> [Cookie] {
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw TrellisError.fileFailed(FileFailure(path: path, operation: "read", reason: "\(error)"))
        }
        do {
            return try JSONDecoder().decode([Cookie].self, from: data)
        } catch {
            throw TrellisError.fileFailed(FileFailure(path: path, operation: "read", reason: "it is not a cookie jar: \(error)"))
        }
    }

    /// Writes `cookies` unless a newer version is already on disk. A failed write keeps the
    /// old file; the cookies stay in memory.
    func save(_ cookies: [Cookie], version: Int) {
        written.withLockedValue { written in
            guard version > written else { return }
            guard let data = try? JSONEncoder().encode(cookies.filter { $0.expiresAt != nil }) else { return }
            guard (try? FileIO.replaceAtomically(path, with: data)) != nil else { return }
            written = version
        }
    }
}
