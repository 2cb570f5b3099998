import AsyncHTTPClient
import NIOCore
import NIOSSL

/// How the transport sets up the `HTTPClient`s it makes: pins checked on every new
/// connection, and the guards every connection gets.
extension AsyncHTTPClientTransport {
    /// `base` with `pins` enforced: pinned CA certificates as the only trust roots, or no
    /// chain verification when the server must present a pinned certificate exactly (the
    /// check after the handshake does that), and the post-handshake check on every new
    /// HTTP/1 and HTTP/2 connection.
    static func configuration(
        _ base: HTTPClient.Configuration,
        checking pins: PinnedHost
    ) -> HTTPClient.Configuration {
        var configuration = base
        configuration.tlsConfiguration = pins.enforcing(on: base.tlsConfiguration ?? .makeClientConfiguration())
        return Self.configuration(configuration, verifyingEachCertificate: pins.verify)
    }

    /// `base` with the server's certificate checked against `check`'s host on every new
    /// connection (a name override's: see ``CertificateNameCheck``).
    static func configuration(
        _ base: HTTPClient.Configuration,
        checking check: CertificateNameCheck
    ) -> HTTPClient.Configuration {
        Self.configuration(base, verifyingEachCertificate: check.verify)
    }

    /// `base` with its connections going through `proxy`, timed for a proxy that relays with
    /// Nagle's algorithm on (see `ProxyRelayTiming`).
    static func configuration(_ base: HTTPClient.Configuration, through proxy: Proxy) -> HTTPClient.Configuration {
        var configuration = Self.configuration(base, settingUpEachConnection: { ProxyRelayTiming.install(on: $0) })
        configuration.proxy = proxy.asyncHTTPClientProxy
        return configuration
    }

    /// `base` with `setUp` run first on every new HTTP/1 and HTTP/2 connection, before the
    /// initializers `base` already has.
    private static func configuration(
        _ base: HTTPClient.Configuration,
        settingUpEachConnection setUp: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) -> HTTPClient.Configuration {
        var configuration = base
        configuration.http1_1ConnectionDebugInitializer = Self.chain(setUp, base.http1_1ConnectionDebugInitializer)
        configuration.http2ConnectionDebugInitializer = Self.chain(setUp, base.http2ConnectionDebugInitializer)
        return configuration
    }

    /// `base` with `verify` given the server's certificate on every new HTTP/1 and HTTP/2
    /// connection, right after the handshake and before the connection carries a request; an
    /// error closes the connection and fails the request with it.
    private static func configuration(
        _ base: HTTPClient.Configuration,
        verifyingEachCertificate verify: @escaping @Sendable (NIOSSLCertificate?) throws -> Void
    ) -> HTTPClient.Configuration {
        var configuration = Self.configuration(base, settingUpEachConnection: { channel in
            channel.nioSSL_peerCertificate().flatMapThrowing(verify).flatMapError { error in
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(error)
            }
        })
        // A mismatch is not transient: trying the connection again until the deadline would
        // only delay the failure.
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    /// `base` with each new HTTP/1 and HTTP/2 connection watched by `hint`, each HTTP/1
    /// connection and HTTP/2 stream guarded against a status AsyncHTTPClient would trap on
    /// (see `ResponseStatusGuard`), each HTTP/1 connection against the bytes an answer left
    /// behind (see `ReusedConnectionGuard`), and each HTTP/2 connection closed when its frames cannot be
    /// parsed (see `HTTP2ConnectionBreak`).
    static func configuration(
        _ base: HTTPClient.Configuration,
        watchedBy hint: ConnectionLoopHint
    ) -> HTTPClient.Configuration {
        var configuration = base
        let watch: @Sendable (any Channel) -> EventLoopFuture<Void> = { hint.watch($0) }
        let guardConnection: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
            ResponseStatusGuard.installOnConnection(channel).flatMap { ReusedConnectionGuard.install(on: channel) }
        }
        let guardStream: @Sendable (any Channel) -> EventLoopFuture<Void> = { ResponseStatusGuard.installOnStream($0) }
        configuration.http1_1ConnectionDebugInitializer = Self.chain(
            watch, Self.chain(guardConnection, base.http1_1ConnectionDebugInitializer)
        )
        let closeWhenBroken: @Sendable (any Channel) -> EventLoopFuture<Void> = { HTTP2ConnectionBreak.install(on: $0) }
        configuration.http2ConnectionDebugInitializer = Self.chain(
            watch, Self.chain(closeWhenBroken, base.http2ConnectionDebugInitializer)
        )
        configuration.http2StreamChannelDebugInitializer = Self.chain(guardStream, base.http2StreamChannelDebugInitializer)
        return configuration
    }

    /// `base` with a client's connectivity settings: TLS, the connection pool and the HTTP
    /// version. (Proxies and name overrides are set per route: see `route(for:)`.)
    static func configuration(
        _ base: HTTPClient.Configuration,
        connecting connectivity: Client.Configuration.Connectivity
    ) -> HTTPClient.Configuration {
        guard !connectivity.isDefault else { return base }
        var configuration = base
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectivity.maximumConnectionsPerHost
        configuration.connectionPool.idleTimeout = TimeAmount(connectivity.idleConnectionTimeout)
        configuration.httpVersion = connectivity.httpVersion == .http1Only ? .http1Only : .automatic
        if !connectivity.tls.isDefault {
            configuration.tlsConfiguration = connectivity.tls.applied(to: base.tlsConfiguration ?? .makeClientConfiguration())
        }
        return configuration
    }

    static func chain(
        _ first: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>,
        _ second: (@Sendable (any Channel) -> EventLoopFuture<Void>)?
    ) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        guard let second else { return first }
        return { channel in first(channel).flatMap { second(channel) } }
    }
}

/// What a client made on demand is for: the proxy it goes through, the host pattern whose TLS
/// settings it uses, and the pinned host pattern whose pins it checks; any of them may be none.
struct RouteKey: Hashable {
    let pinIndex: Int?
    let tlsIndex: Int?
    let proxy: Proxy?
    /// The address a host's name is overridden with on this route.
    var nameOverride: NameOverrideRoute? = nil
    /// For `https+unix`, the name the server's certificate must hold (the request's `Host`).
    var socketServerName: String? = nil
}

/// A name override for one host: the route's client connects to `address` for `host`, and,
/// for `https`, checks that the certificate names `host` (``CertificateNameCheck``).
struct NameOverrideRoute: Hashable {
    let host: String
    let address: String
    let checksCertificateName: Bool
}

/// A proxy's kind and address, whatever its credentials.
struct ProxyAddress: Hashable {
    let kind: Proxy.Kind
    let host: String
    let port: Int

    init(_ proxy: Proxy) {
        kind = proxy.kind
        host = proxy.host
        port = proxy.port
    }
}

extension Proxy {
    /// The proxy as AsyncHTTPClient spells it: a `CONNECT` tunnel through an HTTP proxy, with
    /// Basic credentials sent with every `CONNECT`, or a SOCKS5 proxy.
    var asyncHTTPClientProxy: HTTPClient.Configuration.Proxy {
        switch kind {
        case .http:
            .server(host: host, port: port, authorization: credentials.map { .basic(username: $0.username, password: $0.password) })
        case .socks5:
            .socksServer(host: host, port: port)
        }
    }
}
