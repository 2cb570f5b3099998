/// Whether a client sends requests over unencrypted `http://`.
///
/// Checked for every request and every redirect hop, before anything is sent, so a
/// misconfigured base URL or a redirect cannot leak a request in clear text.
public enum PlainHTTPPolicy: Sendable, Equatable {
    /// `http://` is sent like `https://` (the default).
    case allowed
    /// Only `https://` is sent; `http://` fails with ``TrellisError/invalidRequest(_:)``.
    case refused
    /// `http://` is sent to loopback addresses only (`localhost`, `127.0.0.0/8`, `::1`), for
    /// local development servers and tests.
    ///
    /// The rule judges where the bytes go, not only the name in the URL: every host the
    /// connection reaches (``Transport/hostsReached(by:)``) must be a loopback name or address.
    /// Through a proxy, that is the proxy and the URL's host; with a name override, the
    /// address it connects to. So `http://localhost` through a proxy on another machine is
    /// refused, and `http://api.test` that a name override sends to `127.0.0.1` is sent.
    case refusedExceptLoopback

    /// Refuses `request` when it is plain `http://` and this policy does not let it reach
    /// `hosts`, the hosts its connection would reach (the transport's route).
    func check(_ request: Request, reaching hosts: [String]) throws {
        guard request.head.scheme?.lowercased() == "http" else { return }
        let host = Self.host(of: request.head.authority ?? "")
        let refused = "plain http:// to \(host) is refused by the client (PlainHTTPPolicy.\(self))"
        switch self {
        case .allowed:
            return
        case .refused:
            throw Self.refusal("\(refused); use https://")
        case .refusedExceptLoopback:
            guard let away = hosts.first(where: { !Self.isLoopback($0) }) else { return }
            guard hosts == [host] else {
                throw Self.refusal("""
                    \(refused): its connection would reach \(away), which is not a loopback address (the route goes \
                    \(hosts.joined(separator: " then "))); use https://, or a proxy or name override on loopback
                    """)
            }
            throw Self.refusal("\(refused); use https://")
        }
    }

    private static func refusal(_ reason: String) -> TrellisError {
        TrellisError.invalidRequest(InvalidRequest(.url, reason))
    }

    /// The host of an authority, without user information, port or IPv6 brackets.
    static func host(of authority: String) -> String {
        var host = Substring(authority)
        if let at = host.lastIndex(of: "@") { host = host[host.index(after: at)...] }
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            return String(host[host.index(after: host.startIndex)..<close])
        }
        if let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        return String(host)
    }

    static func isLoopback(_ host: String) -> Bool {
        let lowered = CanonicalHost.form(host)
        if lowered == "localhost" || lowered.hasSuffix(".localhost") || lowered == "::1" { return true }
        let octets = lowered.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
