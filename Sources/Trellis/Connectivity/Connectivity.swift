import Foundation

extension Client.Configuration {
    /// How a client reaches servers: proxies, name overrides, TLS trust and identity, and its
    /// connections. Applied by the client's own transport (a client given these settings and
    /// no transport makes one of its own); a transport you pass keeps its own settings.
    public struct Connectivity: Sendable {
        /// The proxy each request goes through; `nil`, the default, sends every request direct.
        public var proxy: ProxySettings?
        /// Addresses to connect to instead of resolving a host name (curl's `--resolve`), for a
        /// host on every port or on one: `["api.example.com": "10.0.0.7",
        /// "api.example.com:8443": "10.0.0.8"]` (a host and port wins over the host). The
        /// `Host` field, the TLS server name and the certificate check stay those of the name.
        /// Requests through a proxy leave names to the proxy.
        ///
        /// A key that is neither a host nor `host:port`, or an empty address, fails every request
        /// with ``TrellisError/invalidRequest(_:)`` naming the entry.
        public var nameOverrides: [String: String] = [:]
        /// TLS trust, the client's certificate, and the lowest TLS version, for every host but
        /// those given settings of their own (``setTLS(_:forHostsMatching:)``).
        public var tls = TLSSettings()
        /// TLS settings for the hosts a pattern matches, in the order they were set; the first
        /// match wins, in place of ``tls``.
        var tlsByHost: [(pattern: String, settings: TLSSettings)] = []
        /// How many connections a client keeps open to one host at most (HTTP/1.1; an HTTP/2
        /// connection carries many requests at once).
        public var maximumConnectionsPerHost = 8
        /// How long an idle connection is kept for another request.
        public var idleConnectionTimeout: Duration = .seconds(60)
        /// Which HTTP versions are spoken.
        public var httpVersion: HTTPVersionPreference = .http2WhenOffered

        /// The defaults: direct connections, system trust, 8 connections per host kept 60
        /// seconds, and HTTP/2 where the server offers it.
        public init() {}

        /// Uses `settings` in place of ``tls`` for the hosts `pattern` matches: a host
        /// (`api.example.com`), one label under a domain (`*.example.com`) or any depth under it
        /// (`**.example.com`), as ``CertificatePinning`` reads patterns. For a client
        /// certificate that only one service asks for, or a private CA that signs only
        /// internal hosts.
        ///
        /// - Throws: ``InvalidPin`` when `pattern` is not a host pattern.
        public mutating func setTLS(_ settings: TLSSettings, forHostsMatching pattern: String) throws {
            try HostPattern.validate(pattern)
            tlsByHost.append((HostPattern.canonical(pattern), settings))
        }

        /// The index in ``tlsByHost`` of the settings for `host`, if any pattern matches it.
        func tlsIndex(for host: String) -> Int? {
            guard !tlsByHost.isEmpty else { return nil }
            let canonical = CanonicalHost.form(host)
            return tlsByHost.firstIndex { HostPattern.matches($0.pattern, host: canonical) }
        }

        /// The TLS settings for `host`: its pattern's, or the client's.
        func tls(for host: String) -> TLSSettings {
            tlsIndex(for: host).map { tlsByHost[$0].settings } ?? tls
        }

        /// The hosts a connection to `host` and `port` reaches under these settings, in order:
        /// the proxy's for `scheme`, if any (never for a Unix socket), then `host`, or the
        /// address `overrides` connects to in its place where no proxy applies.
        func hostsReached(scheme: String, host: String, port: Int, overrides: NameOverrides) -> [String] {
            guard !scheme.hasSuffix("+unix") else { return [host] }
            if let proxy = proxy?.proxy(forScheme: scheme, host: host, port: port) { return [proxy.host, host] }
            return [overrides.address(host: host, port: port) ?? host]
        }

        /// Whether these are the defaults, which the shared transport serves.
        var isDefault: Bool {
            proxy == nil && nameOverrides.isEmpty && tls.isDefault && tlsByHost.isEmpty && maximumConnectionsPerHost == 8
                && idleConnectionTimeout == .seconds(60) && httpVersion == .http2WhenOffered
        }
    }

    /// Which HTTP versions a client speaks.
    public enum HTTPVersionPreference: Sendable, Hashable {
        /// HTTP/1.1 only.
        case http1Only
        /// HTTP/2 when the server offers it over TLS (ALPN), HTTP/1.1 otherwise.
        case http2WhenOffered
    }
}
