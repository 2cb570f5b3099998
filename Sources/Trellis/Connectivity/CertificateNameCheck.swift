import Foundation
import NIOCore
import NIOSSL

/// The check of a server's certificate against the host a request is for, for a connection
/// whose address a name override chose, or that goes over a Unix socket (`https+unix`, where
/// TLS is given no server name to check).
///
/// swift-nio-ssl accepts a certificate that names the host or the address the connection went
/// to. When the address came from the name, either is the server's; when it came from a name
/// override, a certificate for `127.0.0.1` would pass for `https://example.test`. curl's
/// `--resolve` refuses such a certificate, and so does this check: the certificate must name
/// the URL's host, a DNS name (RFC 6125: one wildcard, as the whole leftmost label, matching
/// one label) or an IP address literal.
struct CertificateNameCheck: Sendable {
    /// Why the check is made here rather than by the TLS stack.
    enum Reason: Sendable, Hashable {
        /// A name override chose the address connected to.
        case nameOverride
        /// The connection goes over a Unix socket, whose path names no server.
        case socket
    }

    /// The host the request is for: the URL's, or the `Host` of a request over a socket.
    let host: String
    var reason = Reason.nameOverride

    /// Throws ``CertificateNameMismatch`` unless `leaf` names ``host``.
    func verify(_ leaf: NIOSSLCertificate?) throws {
        guard let leaf else { throw CertificateNameMismatch(host: host, names: [], reason: reason) }
        let wanted = CanonicalHost.form(host)
        let address = Self.addressBytes(of: wanted)
        var names: [String] = []
        for name in leaf._subjectAlternativeNames() {
            let bytes = Array(name.contents)
            switch name.nameType {
            case .dnsName:
                let dnsName = String(decoding: bytes, as: UTF8.self)
                names.append(dnsName)
                if address == nil, Self.dnsName(dnsName, matches: wanted) { return }
            case .ipAddress:
                names.append(Self.addressText(bytes))
                if let address, address == bytes { return }
            default:
                continue
            }
        }
        throw CertificateNameMismatch(host: host, names: names, reason: reason)
    }

    /// Whether a certificate's DNS name covers `host` (lower case, no final dot).
    static func dnsName(_ name: String, matches host: String) -> Bool {
        var pattern = name.lowercased()
        if pattern.hasSuffix(".") { pattern.removeLast() }
        guard !pattern.isEmpty else { return false }
        guard pattern.hasPrefix("*.") else { return pattern == host }
        // `*.example.com` covers `api.example.com`, not `example.com` nor `a.b.example.com`.
        let suffix = pattern.dropFirst(1)
        guard suffix.count > 1, host.hasSuffix(suffix) else { return false }
        let label = host.dropLast(suffix.count)
        return !label.isEmpty && !label.contains(".")
    }

    /// The bytes of `host` when it is an IPv4 or IPv6 address literal.
    private static func addressBytes(of host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// An IP address as a certificate holds it (4 or 16 bytes), as text.
    private static func addressText(_ bytes: [UInt8]) -> String {
        guard bytes.count == 4 || bytes.count == 16 else { return "an IP address of \(bytes.count) bytes" }
        var text = [UInt8](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let written = bytes.withUnsafeBytes { address in
            text.withUnsafeMutableBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    inet_ntop(family, address.baseAddress, $0, socklen_t(buffer.count))
                }
            }
        }
        guard written != nil else { return "an IP address" }
        return String(decoding: text.prefix { $0 != 0 }, as: UTF8.self)
    }
}

/// A server certificate that does not name the host the request is for.
struct CertificateNameMismatch: Error, CustomStringConvertible {
    let host: String
    /// The names the certificate holds.
    let names: [String]
    let reason: CertificateNameCheck.Reason

    var description: String {
        let held = names.isEmpty ? "no name" : names.joined(separator: ", ")
        let why = switch reason {
        case .nameOverride: "the name override chose the address, not whose certificate is accepted"
        case .socket: "over a Unix socket, the certificate must name the request's Host (localhost unless set)"
        }
        return "the server's certificate does not name \(host) (it names \(held)); \(why)"
    }
}
