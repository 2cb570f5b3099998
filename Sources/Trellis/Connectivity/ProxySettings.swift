public import Foundation

/// Which proxy, if any, each request goes through: the rule a client applies to every hop
/// (a redirect to another host is decided again for that host).
///
/// ```swift
/// $0.connectivity.proxy = .always(.socks5(host: "127.0.0.1", port: 1080))
/// $0.connectivity.proxy = try Proxy.fromEnvironment()     // HTTPS_PROXY, NO_PROXY, as curl reads them
/// $0.connectivity.proxy = .choosing { scheme, host, port in host.hasSuffix(".corp") ? corporate : nil }
/// ```
public struct ProxySettings: Sendable {
    private let choose: @Sendable (_ scheme: String, _ host: String, _ port: Int) -> Proxy?
    /// The proxies of ``always(_:except:)`` and ``perScheme(http:https:except:)``, which
    /// URLSession can be given; `nil` for ``choosing(_:)``, which only a closure can say.
    let fixed: (http: Proxy?, https: Proxy?, excluded: NoProxy)?

    /// Answers an HTTP proxy's `407 Proxy Authentication Required`: the credentials to send it
    /// instead, or `nil` to fail the call. It is called once per challenge; the call is then
    /// sent once more with the credentials, which the client keeps for that proxy. A proxy that
    /// answers `407` to them too fails the call, naming the proxy, without asking again.
    ///
    /// ```swift
    /// var proxy = ProxySettings.always(.http(host: "proxy.corp", port: 3128))
    /// proxy.credentialsForChallenge = { proxy in try await vault.credentials(for: proxy.host) }
    /// ```
    public var credentialsForChallenge: (@Sendable (_ proxy: Proxy) async throws -> Proxy.Credentials?)?

    /// Every request through `proxy`, but those to destinations `except` matches.
    public static func always(_ proxy: Proxy, except excluded: NoProxy = .none) -> ProxySettings {
        perScheme(http: proxy, https: proxy, except: excluded)
    }

    /// `http://` and `ws://` requests through `http`, `https://` and `wss://` requests through
    /// `https` (either `nil`: direct), but those to destinations `except` matches.
    public static func perScheme(http: Proxy?, https: Proxy?, except excluded: NoProxy = .none) -> ProxySettings {
        ProxySettings(choose: { scheme, host, port in
            if excluded.matches(host: host, port: port) { return nil }
            return scheme == "https" ? https : http
        }, fixed: (http, https, excluded), credentialsForChallenge: nil)
    }

    /// The proxy `choose` picks for each request's scheme (`http` or `https`), host and port;
    /// `nil` sends it direct. It is called for every hop, so keep it quick.
    public static func choosing(_ choose: @escaping @Sendable (_ scheme: String, _ host: String, _ port: Int) -> Proxy?) -> ProxySettings {
        ProxySettings(choose: choose, fixed: nil, credentialsForChallenge: nil)
    }

    /// The proxy for a request to `scheme` (`ws` counts as `http`, `wss` as `https`), `host`
    /// and `port`, or `nil` to go direct.
    public func proxy(forScheme scheme: String, host: String, port: Int) -> Proxy? {
        let scheme = scheme.lowercased()
        return choose(scheme == "https" || scheme == "wss" ? "https" : "http", host, port)
    }
}

extension Proxy {
    /// The proxies the environment names, read as curl reads them; `nil` when it names none.
    ///
    /// - `https://` (and `wss://`) requests: `https_proxy`, else `HTTPS_PROXY`;
    /// - `http://` (and `ws://`) requests: `http_proxy` (lower case only: curl ignores
    ///   `HTTP_PROXY`, which a CGI server sets from a request's `Proxy` header);
    /// - either, when its own is not set: `all_proxy`, else `ALL_PROXY`;
    /// - `no_proxy`, else `NO_PROXY`: the destinations that go direct (see ``NoProxy``).
    ///
    /// An empty variable counts as unset. Nothing is read unless you call this: a client never
    /// takes a proxy from the environment by itself.
    ///
    /// - Parameter environment: the variables; the process's by default.
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming the variable whose value is not a
    ///   proxy URL or a no-proxy list (a password in it is redacted).
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ProxySettings? {
        func read(_ names: String...) throws -> Proxy? {
            for name in names {
                guard let value = environment[name], !value.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
                do {
                    return try Proxy(url: value)
                } catch {
                    throw Proxy.invalid(value, "is not a proxy URL (such as http://proxy.example.com:3128)", variable: name)
                }
            }
            return nil
        }
        let all = try read("all_proxy", "ALL_PROXY")
        let https = try read("https_proxy", "HTTPS_PROXY") ?? all
        let http = try read("http_proxy") ?? all
        guard http != nil || https != nil else { return nil }
        var excluded = NoProxy.none
        for name in ["no_proxy", "NO_PROXY"] {
            guard let value = environment[name], !value.isEmpty else { continue }
            do {
                excluded = try NoProxy(value)
            } catch {
                throw TrellisError.invalidRequest(.init(.url, "\(name) (\"\(value)\") is not a no-proxy list: \(error)"))
            }
            break
        }
        return .perScheme(http: http, https: https, except: excluded)
    }
}
