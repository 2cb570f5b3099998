import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Darwin)
import CFNetwork
import Security
#endif

/// What URLSession can apply of a client's connectivity settings, and how.
///
/// On Apple platforms: a proxy for every destination (``ProxySettings/always(_:except:)`` or
/// ``ProxySettings/perScheme(http:https:except:)``) as the session's proxy dictionary, its
/// credentials in the proxy's challenge; private trust and pins in the server-trust challenge;
/// a client identity from PKCS#12 in the client-certificate challenge; the minimum TLS version
/// and the connections per host in the session's configuration. On Linux, FoundationNetworking
/// ignores proxy dictionaries and offers no TLS challenges: only the connections per host apply.
struct URLSessionConnectivity: Sendable {
    let settings: Client.Configuration.Connectivity

    /// The settings URLSession cannot apply on this platform, each named for the error that
    /// refuses them; empty when it can apply them all.
    static func unsupported(in settings: Client.Configuration.Connectivity) -> [String] {
        var refused: [String] = []
        if !settings.nameOverrides.isEmpty { refused.append("name overrides") }
        #if canImport(Darwin)
        if let proxy = settings.proxy {
            if let problem = proxyProblem(proxy) { refused.append(problem) }
        }
        let identities = ([settings.tls] + settings.tlsByHost.map(\.settings)).compactMap(\.clientIdentity)
        if identities.contains(where: { $0.archive == nil }) {
            refused.append("a client identity read from PEM (URLSession on Apple platforms takes one from PKCS#12)")
        }
        if settings.tlsByHost.contains(where: { $0.settings.minimumVersion != settings.tls.minimumVersion }) {
            refused.append("a minimum TLS version for some hosts alone")
        }
        #else
        if settings.proxy != nil { refused.append("a proxy (FoundationNetworking on Linux ignores proxies)") }
        if !settings.tls.isDefault || !settings.tlsByHost.isEmpty {
            refused.append("TLS trust, a client certificate or a minimum TLS version (FoundationNetworking on Linux has no TLS challenges)")
        }
        #endif
        return refused
    }

    #if canImport(Darwin)
    /// The host of the proxy CFNetwork chooses for `url` under the session's proxy dictionary,
    /// or under the system's settings when the session has none; empty when it goes direct.
    static func proxyHosts(for url: URL, sessionProxies: [AnyHashable: Any]?) -> [String] {
        let settings: CFDictionary
        if let sessionProxies {
            settings = sessionProxies as CFDictionary
        } else if let system = CFNetworkCopySystemProxySettings()?.takeRetainedValue() {
            settings = system
        } else {
            return []
        }
        let proxies = CFNetworkCopyProxiesForURL(url as CFURL, settings).takeRetainedValue() as? [[String: Any]] ?? []
        guard let first = proxies.first, let type = first[kCFProxyTypeKey as String] as? String, type != (kCFProxyTypeNone as String) else {
            return []
        }
        // A proxy auto-configuration names its proxy only once it has run: no loopback address.
        return [first[kCFProxyHostNameKey as String] as? String ?? "the proxy a proxy auto-configuration chooses"]
    }
    #else
    /// The host of the proxy libcurl takes from the environment for `scheme`, `host` and
    /// `port`, as curl reads it; empty when it goes direct.
    static func environmentProxyHosts(scheme: String, host: String, port: Int) -> [String] {
        do {
            return (try Proxy.fromEnvironment()?.proxy(forScheme: scheme, host: host, port: port)).map { [$0.host] } ?? []
        } catch {
            // libcurl would try a value Trellis cannot read: where it leads is not known.
            return ["the proxy the environment names (\(error))"]
        }
    }
    #endif

    /// `configuration` with the settings the session's configuration holds.
    func apply(to configuration: URLSessionConfiguration) {
        configuration.httpMaximumConnectionsPerHost = settings.maximumConnectionsPerHost
        #if canImport(Darwin)
        if settings.tls.minimumVersion == .tls13 { configuration.tlsMinimumSupportedProtocolVersion = .TLSv13 }
        if let fixed = settings.proxy?.fixed { configuration.connectionProxyDictionary = Self.proxyDictionary(fixed) }
        #endif
    }

    #if canImport(Darwin)
    /// Why URLSession cannot be given `proxy`, or `nil` when it can.
    private static func proxyProblem(_ proxy: ProxySettings) -> String? {
        guard let fixed = proxy.fixed else { return "a proxy chosen per destination (ProxySettings.choosing)" }
        if proxy.credentialsForChallenge != nil { return "a proxy's credentialsForChallenge" }
        let proxies = [fixed.http, fixed.https].compactMap { $0 }
        if Set(proxies.map(\.kind)).count > 1 { return "an HTTP proxy for one scheme and a SOCKS5 proxy for the other" }
        if proxies.contains(where: \.tunnelsPlainHTTP) { return "tunnelsPlainHTTP (URLSession forwards http:// requests)" }
        if fixed.excluded.exceptionPatterns == nil { return "a no-proxy entry with a port" }
        return nil
    }

    /// The session's proxy dictionary for fixed proxies (the keys are CFNetwork's).
    private static func proxyDictionary(_ fixed: (http: Proxy?, https: Proxy?, excluded: NoProxy)) -> [AnyHashable: Any] {
        var dictionary: [AnyHashable: Any] = [:]
        for (proxy, prefix) in [(fixed.http, "HTTP"), (fixed.https, "HTTPS")] {
            guard let proxy else { continue }
            let keyPrefix = proxy.kind == .socks5 ? "SOCKS" : prefix
            dictionary["\(keyPrefix)Enable"] = 1
            dictionary["\(keyPrefix)Proxy"] = proxy.host
            dictionary["\(keyPrefix)Port"] = proxy.port
        }
        if let patterns = fixed.excluded.exceptionPatterns, !patterns.isEmpty { dictionary["ExceptionsList"] = patterns }
        return dictionary
    }

    /// How to answer `challenge`: a disposition, its credential, and why the exchange was
    /// refused when it was.
    func answer(
        _ challenge: URLAuthenticationChallenge,
        pinning: CertificatePinning?
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?, URLSessionExchange.Refusal?) {
        let space = challenge.protectionSpace
        if space.isProxy() {
            return answerProxy(challenge)
        }
        switch space.authenticationMethod {
        case NSURLAuthenticationMethodServerTrust:
            guard let trust = space.serverTrust else { return (.performDefaultHandling, nil, nil) }
            return answerServerTrust(trust, host: space.host, pins: pinning?.pins(for: space.host))
        case NSURLAuthenticationMethodClientCertificate:
            guard let archive = settings.tls(for: space.host).clientIdentity?.archive,
                let credential = Self.credential(fromPKCS12: archive.data, password: archive.password)
            else { return (.performDefaultHandling, nil, nil) }
            return (.useCredential, credential, nil)
        default:
            return (.performDefaultHandling, nil, nil)
        }
    }

    /// The configured credentials for the proxy that asks, once; a proxy that asks again (or
    /// asks when none are configured) ends the exchange, named.
    private func answerProxy(_ challenge: URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?, URLSessionExchange.Refusal?) {
        let space = challenge.protectionSpace
        let proxies = [settings.proxy?.fixed?.http, settings.proxy?.fixed?.https].compactMap { $0 }
        guard let proxy = proxies.first(where: { $0.host.lowercased() == space.host.lowercased() && $0.port == space.port }) else {
            return (.performDefaultHandling, nil, nil)
        }
        guard let credentials = proxy.credentials else {
            return (.cancelAuthenticationChallenge, nil, .proxy(name: "\(proxy)", reason: "the proxy asks for credentials (407) and none are configured"))
        }
        guard challenge.previousFailureCount == 0 else {
            return (.cancelAuthenticationChallenge, nil, .proxy(name: "\(proxy)", reason: "the proxy refused the credentials sent to it (407)"))
        }
        return (.useCredential, URLCredential(user: credentials.username, password: credentials.password, persistence: .forSession), nil)
    }

    /// The server's certificate checked against the host's trust settings, then its pins.
    private func answerServerTrust(
        _ trust: SecTrust,
        host: String,
        pins: PinnedHost?
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?, URLSessionExchange.Refusal?) {
        let trusted = settings.tls(for: host).trust
        if case .system = trusted, pins == nil { return (.performDefaultHandling, nil, nil) }
        let (authorities, onlyThese): ([TrustedCertificate], Bool) =
            switch trusted {
            case .system: ([], false)
            case .systemAnd(let added): (added, false)
            case .only(let chosen): (chosen, true)
            }
        if !authorities.isEmpty || onlyThese {
            let certificates = authorities.compactMap { try? $0.certificate.toDERBytes() }.compactMap {
                SecCertificateCreateWithData(nil, Data($0) as CFData)
            }
            SecTrustSetAnchorCertificates(trust, certificates as CFArray)
            SecTrustSetAnchorCertificatesOnly(trust, onlyThese)
            var error: CFError?
            if !SecTrustEvaluateWithError(trust, &error) {
                let reason = error.map { CFErrorCopyDescription($0) as String } ?? "untrusted"
                return (.cancelAuthenticationChallenge, nil, .trust("the server's certificate does not lead to a trusted authority (\(reason))"))
            }
        }
        if let pins, let reason = ServerTrustPinning.mismatch(of: trust, pins: pins) {
            return (.cancelAuthenticationChallenge, nil, .pins(reason))
        }
        return (.useCredential, URLCredential(trust: trust), nil)
    }

    /// A credential for the identity in a PKCS#12 archive, or `nil` when Security cannot read it.
    private static func credential(fromPKCS12 archive: Data, password: String) -> URLCredential? {
        var items: CFArray?
        let options = [kSecImportExportPassphrase as String: password] as CFDictionary
        guard SecPKCS12Import(archive as CFData, options, &items) == errSecSuccess,
            let entries = items as? [[String: Any]], let entry = entries.first,
            let identity = entry[kSecImportItemIdentity as String]
        else { return nil }
        let chain = entry[kSecImportItemCertChain as String] as? [SecCertificate] ?? []
        // The chain's first certificate is the identity's own, which the credential holds already.
        return URLCredential(identity: identity as! SecIdentity, certificates: Array(chain.dropFirst()), persistence: .forSession)
    }
    #endif
}

#if canImport(Darwin)
extension NoProxy {
    /// The list as CFNetwork's `ExceptionsList` spells it (`*.example.com`, `10.0.0.0/8`), or
    /// `nil` when an entry names a port, which that list cannot.
    var exceptionPatterns: [String]? {
        var patterns: [String] = []
        for entry in entries {
            switch entry {
            case .everything:
                patterns.append("*")
            case .domain(let name, let port):
                guard port == nil else { return nil }
                patterns += [name, "*.\(name)"]
            case .address(let bytes, let prefixLength, let port):
                guard port == nil else { return nil }
                let address = bytes.count == 4
                    ? bytes.map(String.init).joined(separator: ".")
                    : stride(from: 0, to: bytes.count, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
                        .joined(separator: ":")
                patterns.append(prefixLength == bytes.count * 8 ? address : "\(address)/\(prefixLength)")
            }
        }
        return patterns
    }
}
#endif
