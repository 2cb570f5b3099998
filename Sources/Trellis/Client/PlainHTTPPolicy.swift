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
    case refusedExceptLoopback

    func check(_ request: Request) throws {
        guard request.head.scheme?.lowercased() == "http" else { return }
        let host = Self.host(of: request.head.authority ?? "")
        if self == .refusedExceptLoopback, Self.isLoopback(host) { return }
        throw TrellisError.invalidRequest(InvalidRequest(
            .url,
            "plain http:// to \(host) is refused by the client (PlainHTTPPolicy.\(self)); use https://"
        ))
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
