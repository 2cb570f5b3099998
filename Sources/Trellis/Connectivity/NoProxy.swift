import Foundation

/// The destinations that go direct rather than through a proxy, as curl reads `NO_PROXY`.
///
/// A comma-separated list (spaces around entries are ignored):
/// - `*` alone: every destination;
/// - a host name, with or without a leading dot: that host and every host under it
///   (`example.com` and `.example.com` both match `example.com` and `api.example.com`, never
///   `badexample.com`);
/// - an IP address (`10.0.0.7`, `::1`, `[::1]`): that address; with a prefix length
///   (`10.0.0.0/8`, `fd00::/8`), every address in the range;
/// - any of these followed by `:port`: only that port.
///
/// Names are compared without case and without a trailing dot. A destination given as an IP
/// address matches only address entries: no name is looked up.
public struct NoProxy: Sendable, Hashable, CustomStringConvertible {
    enum Entry: Sendable, Hashable {
        case everything
        case domain(String, port: Int?)
        case address([UInt8], prefixLength: Int, port: Int?)
    }

    let entries: [Entry]
    /// The list as it was given.
    public let description: String

    /// No destination is excluded.
    public static let none = NoProxy(entries: [], description: "")

    /// The list `text` describes.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming an entry that is none of the
    ///   forms above (a port that is not a number, a prefix too long for its address).
    public init(_ text: String) throws {
        var entries: [Entry] = []
        for raw in text.split(separator: ",") {
            let item = raw.trimmingCharacters(in: .whitespaces)
            if item.isEmpty { continue }
            guard let entry = Self.entry(item) else {
                throw TrellisError.invalidRequest(.init(.url, "the no-proxy entry \"\(item)\" is not a host, an address, a range or \"*\""))
            }
            entries.append(entry)
        }
        self.init(entries: entries, description: text)
    }

    private init(entries: [Entry], description: String) {
        self.entries = entries
        self.description = description
    }

    /// Whether a request to `host` and `port` goes direct.
    public func matches(host: String, port: Int) -> Bool {
        let name = Self.normalized(host)
        let address = IPAddress.bytes(of: name)
        return entries.contains { entry in
            switch entry {
            case .everything:
                return true
            case .domain(let domain, let entryPort):
                guard entryPort == nil || entryPort == port, address == nil else { return false }
                return name == domain || name.hasSuffix("." + domain)
            case .address(let bytes, let prefixLength, let entryPort):
                guard entryPort == nil || entryPort == port, let address, address.count == bytes.count else { return false }
                return IPAddress.prefix(of: address, equals: bytes, length: prefixLength)
            }
        }
    }

    private static func entry(_ item: String) -> Entry? {
        if item == "*" { return .everything }
        var host = item
        var port: Int?
        if item.hasPrefix("[") {
            // [v6] or [v6]:port, perhaps with /prefix inside or after.
            guard let close = item.firstIndex(of: "]") else { return nil }
            host = String(item[item.index(after: item.startIndex)..<close])
            let rest = item[item.index(after: close)...]
            if rest.hasPrefix("/") {
                host += rest
            } else if rest.hasPrefix(":") {
                guard let number = Int(rest.dropFirst()), (1...65535).contains(number) else { return nil }
                port = number
            } else if !rest.isEmpty {
                return nil
            }
        } else if item.filter({ $0 == ":" }).count == 1, let colon = item.firstIndex(of: ":") {
            guard let number = Int(item[item.index(after: colon)...]), (1...65535).contains(number) else { return nil }
            port = number
            host = String(item[..<colon])
        }
        let parts = host.split(separator: "/", maxSplits: 1).map(String.init)
        if let bytes = IPAddress.bytes(of: parts[0]) {
            let length = parts.count == 2 ? Int(parts[1]) : bytes.count * 8
            guard let length, (0...(bytes.count * 8)).contains(length) else { return nil }
            return .address(bytes, prefixLength: length, port: port)
        }
        guard parts.count == 1 else { return nil }
        var domain = normalized(parts[0])
        if domain.hasPrefix(".") { domain.removeFirst() }
        if domain.hasPrefix("*.") { domain.removeFirst(2) }
        guard !domain.isEmpty, domain.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_" }) else { return nil }
        return .domain(domain, port: port)
    }

    private static func normalized(_ host: String) -> String {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        while name.hasSuffix(".") { name.removeLast() }
        return name
    }
}

/// IP addresses as bytes, to compare ranges.
enum IPAddress {
    /// The 4 or 16 bytes of an IPv4 or IPv6 address in text, or `nil` for anything else.
    static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// Whether the first `length` bits of `address` and `range` agree.
    static func prefix(of address: [UInt8], equals range: [UInt8], length: Int) -> Bool {
        for bit in 0..<length {
            let mask = UInt8(0x80) >> UInt8(bit % 8)
            if address[bit / 8] & mask != range[bit / 8] & mask { return false }
        }
        return true
    }
}
