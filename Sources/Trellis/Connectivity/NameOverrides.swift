import Foundation

/// A client's name overrides as ``Client/Configuration/Connectivity/nameOverrides`` spells them,
/// read once: the address for a host on any port, and for a host on one port.
struct NameOverrides: Sendable {
    /// A host (lower case, without brackets) and a port.
    struct HostAndPort: Hashable, Sendable {
        let host: String
        let port: Int
    }

    /// Addresses by host, for every port.
    private(set) var byHost: [String: String] = [:]
    /// Addresses by host and port, which win over the host's.
    private(set) var byHostAndPort: [HostAndPort: String] = [:]

    /// No overrides.
    init() {}

    /// Whether there are no overrides.
    var isEmpty: Bool { byHost.isEmpty && byHostAndPort.isEmpty }

    /// The overrides `entries` spell: `host` or `host:port` (`[v6]:port`) keys, addresses as values.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming an entry that is neither, or whose
    ///   address is empty.
    init(_ entries: [String: String]) throws(TrellisError) {
        for (key, address) in entries {
            let trimmed = address.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.contains("/") else {
                throw Self.invalid(key, address, "the address is not a host name or an IP address")
            }
            let connectTo = trimmed.hasPrefix("[") ? String(trimmed.dropFirst().dropLast()) : trimmed
            switch Self.split(key) {
            case (let host, nil)?:
                byHost[host] = connectTo
            case (let host, let port?)?:
                byHostAndPort[HostAndPort(host: host, port: port)] = connectTo
            case nil:
                throw Self.invalid(key, address, "the key is not a host name, or a host name and a port (api.example.com:8443)")
            }
        }
    }

    /// The address to connect to for `host` on `port`, if one is set.
    func address(host: String, port: Int) -> String? {
        guard !byHost.isEmpty || !byHostAndPort.isEmpty else { return nil }
        let name = Self.plain(host)
        return byHostAndPort[HostAndPort(host: name, port: port)] ?? byHost[name]
    }

    /// `host` as hosts are compared: lower case, without IPv6 brackets or a final dot.
    private static func plain(_ host: String) -> String {
        CanonicalHost.form(host)
    }

    /// The host and port of a key, or `nil` when it is not `host`, `host:port`, an IPv6
    /// address, or `[v6]:port`.
    private static func split(_ key: String) -> (host: String, port: Int?)? {
        let key = key.trimmingCharacters(in: .whitespaces)
        guard !key.isEmpty, !key.contains("/"), !key.contains("@") else { return nil }
        if key.hasPrefix("[") {
            guard let close = key.firstIndex(of: "]") else { return nil }
            let host = plain(String(key[...close]))
            let rest = key[key.index(after: close)...]
            if rest.isEmpty { return (host, nil) }
            guard rest.first == ":", let port = Int(rest.dropFirst()), (1...65535).contains(port) else { return nil }
            return (host, port)
        }
        let colons = key.count { $0 == ":" }
        if colons > 1 { return (plain(key), nil) }  // an IPv6 address without brackets
        guard colons == 1 else { return (plain(key), nil) }
        let parts = key.split(separator: ":", omittingEmptySubsequences: false)
        guard !parts[0].isEmpty, let port = Int(parts[1]), (1...65535).contains(port) else { return nil }
        return (plain(String(parts[0])), port)
    }

    private static func invalid(_ key: String, _ address: String, _ problem: String) -> TrellisError {
        .invalidRequest(InvalidRequest(.url, "the name override \"\(key)\": \"\(address)\" cannot be used: \(problem)"))
    }
}
