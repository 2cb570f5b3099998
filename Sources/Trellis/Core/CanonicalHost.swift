#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A host name in the one form that policies compare: lowercased, without the trailing dot of
/// a fully qualified name or the brackets of an IPv6 literal, and an IP address in its
/// canonical text (`::1` for `0:0:0:0:0:0:0:1`, `127.0.0.1` for `127.1`). Written differently, a
/// host would otherwise escape a pin or a policy while the resolver still reaches it.
enum CanonicalHost {
    /// Whether `host` (without brackets) is an IPv4 or IPv6 address rather than a name.
    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    static func form(_ host: String) -> String {
        var host = Substring(host.lowercased())
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        while host.hasSuffix(".") && host.count > 1 { host = host.dropLast() }
        if host.contains(":") { return ipv6(String(host)) ?? String(host) }
        if host.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == "x" }), let address = ipv4(String(host)) {
            return address
        }
        return String(host)
    }

    private static func ipv6(_ text: String) -> String? {
        var address = in6_addr()
        // A zone ("fe80::1%eth0") is no part of the address.
        let bare = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        guard inet_pton(AF_INET6, bare, &address) == 1 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return decoded(buffer)
    }

    /// The forms `inet_aton` accepts (and so `getaddrinfo`): `127.1`, `0x7f.0.0.1`, `2130706433`.
    private static func ipv4(_ text: String) -> String? {
        var address = in_addr()
        guard inet_aton(text, &address) != 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        guard inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return decoded(buffer)
    }

    private static func decoded(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
