public import AsyncHTTPClient
import Atomics
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A ``Transport`` over AsyncHTTPClient: connection pooling, HTTP/2 when the server offers
/// it, and TLS through SwiftNIO SSL. The default on Linux.
///
/// ``shared`` serves every client that does not bring its own transport. A transport made
/// with your own `HTTPClient.Configuration` owns its `HTTPClient`: call ``shutdown()`` when
/// you are done with it (it is also shut down when the transport is released).
public final class AsyncHTTPClientTransport: Transport {
    /// The transport every client uses by default on Linux, alive for the whole process.
    public static let shared = AsyncHTTPClientTransport(configuration: defaultConfiguration)

    /// Trellis's defaults: full certificate verification, redirects left to the client's
    /// ``RedirectPolicy`` (a transport that followed them too would bypass its checks), a
    /// 10-second connect timeout, HTTP/2 when offered, and no silent retrying of
    /// failed connection attempts (AsyncHTTPClient's default retries a refused connection until
    /// the connect timeout; a refused connection should fail at once).
    public static var defaultConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            certificateVerification: .fullVerification,
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10))
        )
        configuration.httpVersion = .automatic
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    /// The underlying client, for every host that is not pinned.
    public let httpClient: HTTPClient
    let ownsClient: Bool
    /// Set by ``shutdown()`` before the clients are shut down. AsyncHTTPClient fails a request
    /// to a client that is shutting down without a word to its delegate: a call that sees this
    /// set waits for the task's result instead (see `sendBuffered`).
    let isShuttingDown = ManagedAtomic(false)
    /// The pins this transport checks, if any.
    public let pinning: CertificatePinning?
    /// `true`: the transport checks ``pinning`` on its connections, none when it is `nil`.
    public var checksPins: Bool { true }
    /// Where a request to a host that is not pinned goes: ``httpClient``.
    private let defaultRoute: Route
    /// One client per pinned host pattern, in the order of `pinning.hosts`: a connection
    /// pool only ever holds connections checked against one set of pins.
    private let pinnedRoutes: [Route]
    /// Which proxy each request goes through, if any, and the TLS settings of host patterns
    /// (``Client/Configuration/Connectivity``).
    private let connectivity: Client.Configuration.Connectivity
    private var proxy: ProxySettings? { connectivity.proxy }
    /// The connectivity settings' name overrides, read; empty when they cannot be.
    private let nameOverrides: NameOverrides
    /// Why the name overrides cannot be read, which every request then fails with.
    private let invalidNameOverride: TrellisError?
    /// The configuration the clients made on demand start from: the default route's, the
    /// connectivity settings applied.
    private let onDemandConfiguration: HTTPClient.Configuration
    /// The TLS configuration a host pattern's own settings apply to.
    private let baseTLS: TLSConfiguration
    /// A client per proxy, per host pattern with TLS settings of its own (and per pinned host
    /// pattern among those), made when a request first needs it.
    private let onDemandRoutes = NIOLockedValueBox<[RouteKey: Route]>([:])
    /// The credentials ``ProxySettings/credentialsForChallenge`` gave for each proxy, by its
    /// address, sent from then on in place of the configured ones.
    private let challengeCredentials = NIOLockedValueBox<[ProxyAddress: Proxy.Credentials]>([:])
    /// The deadlines of the calls under way over the delegate API, which fail their tasks.
    let deadlines = DeadlineTimer<HTTPClient.Task<Void>> { task in
        task.fail(reason: HTTPClientError.deadlineExceeded)
    }
    /// Requests made for recent URLs, which a call to one of them reuses (see `PreparedRequests`).
    let preparedRequests = PreparedRequests()
    /// Whether AsyncHTTPClient decodes compressed bodies itself (its `decompression` setting),
    /// so the client's compression stage must not decode them again.
    public let decodesContentEncoding: Bool
    /// `true`: every exchange, buffered, streamed or forwarded to a proxy, is cancelled through
    /// its limits when a hedge answers first.
    public var cancelsCalledOffExchanges: Bool { true }

    /// A transport with its own `HTTPClient` made from `configuration`, checking `pinning`.
    ///
    /// Redirects are the client's (``RedirectPolicy``): `configuration.redirectConfiguration`
    /// is set to `.disallow`. A transport that followed them itself would take a request, and
    /// the credentials on it, to another origin without the redirect stage's checks.
    ///
    /// The client's own tracing (`configuration.tracing.tracer`) is turned off: Trellis traces
    /// each call itself and sends its context with every hop. AsyncHTTPClient's span would be a
    /// second one, a root span cut off from the call when it starts on the event loop, and on
    /// a request with a body its context would go out as a second `traceparent` field.
    ///
    /// Each pinned host pattern gets a client of its own (sharing the event loops), whose
    /// trust roots are the pinned CA certificates and which checks the server certificate
    /// of every new connection right after the handshake, before the connection carries a
    /// request. A mismatch closes the connection and fails the request with
    /// ``TrellisError/pinningFailed(_:)``.
    ///
    /// `connectivity` adds a client's proxies, name overrides, TLS settings and connection
    /// settings to `configuration` (a ``Client`` given such settings makes its transport this way).
    public init(
        configuration: HTTPClient.Configuration = AsyncHTTPClientTransport.defaultConfiguration,
        pinning: CertificatePinning? = nil,
        connectivity: Client.Configuration.Connectivity = .init()
    ) {
        self.baseTLS = configuration.tlsConfiguration ?? .makeClientConfiguration()
        do {
            self.nameOverrides = try NameOverrides(connectivity.nameOverrides)
            self.invalidNameOverride = nil
        } catch {
            self.nameOverrides = NameOverrides()
            self.invalidNameOverride = error
        }
        var configuration = Self.configuration(configuration, connecting: connectivity)
        configuration.tracing.tracer = nil
        configuration.redirectConfiguration = .disallow
        self.connectivity = connectivity
        self.onDemandConfiguration = configuration
        let hint = ConnectionLoopHint(group: HTTPClient.defaultEventLoopGroup)
        self.httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.configuration(configuration, watchedBy: hint))
        self.defaultRoute = Route(client: httpClient, pins: nil, hint: hint)
        self.ownsClient = true
        self.pinning = pinning
        if case .enabled = configuration.decompression { self.decodesContentEncoding = true } else { self.decodesContentEncoding = false }
        self.pinnedRoutes = (pinning?.hosts ?? []).map { pins in
            let hint = ConnectionLoopHint(group: HTTPClient.defaultEventLoopGroup)
            let client = HTTPClient(
                eventLoopGroupProvider: .singleton,
                configuration: Self.configuration(Self.configuration(configuration, checking: pins), watchedBy: hint)
            )
            return Route(client: client, pins: pins, hint: hint)
        }
    }

    /// A transport with Trellis's defaults and its own connect timeout: how long opening a
    /// connection (TCP and TLS) may take, apart from the request's overall timeout. A host
    /// that does not answer then fails fast with ``TrellisError/connectionFailed(_:)`` (which
    /// a ``RetryPolicy`` retries) instead of using up the whole request timeout.
    public convenience init(connectTimeout: Duration, pinning: CertificatePinning? = nil) {
        var configuration = Self.defaultConfiguration
        configuration.timeout.connect = TimeAmount(connectTimeout)
        self.init(configuration: configuration, pinning: pinning)
    }

    /// A transport over an `HTTPClient` you manage (and shut down) yourself. Trellis decodes
    /// compressed bodies itself; leave the client's `decompression` disabled (its default), or
    /// turn the client's ``Client/Configuration/Compression/decodesResponses`` off. Trellis also
    /// traces each call itself: set the client's `tracing.tracer` to `nil` so that a call makes
    /// one span, not two.
    public init(httpClient: HTTPClient) {
        self.httpClient = httpClient
        // The transport cannot watch the connections of a client it did not make.
        self.defaultRoute = Route(client: httpClient, pins: nil, hint: nil)
        self.ownsClient = false
        self.pinning = nil
        self.pinnedRoutes = []
        self.decodesContentEncoding = false
        self.connectivity = .init()
        self.nameOverrides = NameOverrides()
        self.invalidNameOverride = nil
        self.onDemandConfiguration = Self.defaultConfiguration  // never used: no settings
        self.baseTLS = .makeClientConfiguration()
    }

    deinit {
        if ownsClient {
            httpClient.shutdown { _ in }
        }
        for route in pinnedRoutes {
            route.client.shutdown { _ in }
        }
        for route in onDemandRoutes.withLockedValue({ Array($0.values) }) {
            route.client.shutdown { _ in }
        }
    }

    /// Shuts down the owned `HTTPClient`s, closing their connections.
    public func shutdown() async throws {
        isShuttingDown.store(true, ordering: .sequentiallyConsistent)
        if ownsClient {
            try await httpClient.shutdown()
        }
        for route in pinnedRoutes {
            try await route.client.shutdown()
        }
        for route in onDemandRoutes.withLockedValue({ Array($0.values) }) {
            try await route.client.shutdown()
        }
    }

    /// A client, the pins it checks, and the hint that notes the loop its connections last
    /// read on (none for a client the caller brought).
    struct Route: Sendable {
        let client: HTTPClient
        let pins: PinnedHost?
        let hint: ConnectionLoopHint?
        /// The proxy the client's connections go through, if any.
        var proxy: Proxy? = nil
        /// Whether requests on this route are forwarded to ``proxy`` (`http://` through an HTTP
        /// proxy) rather than sent through `client`.
        var forwardsToProxy = false
    }

    /// The route of `request`: the client of its pinned host pattern, if any, of the host
    /// pattern whose TLS settings it takes, if any, and of the proxy it goes through, if any.
    func route(for request: Request) throws -> Route {
        // AsyncHTTPClient gives TLS no server name over a socket, and so cannot check one:
        // such a route checks the name the request is for itself.
        if request.head.scheme == "https+unix" {
            return try onDemandRoute(RouteKey(pinIndex: nil, tlsIndex: nil, proxy: nil, socketServerName: request.socketServerName))
        }
        // Most transports have one route: they read nothing of the request to choose it.
        guard pinning != nil || connectivity.proxy != nil || !connectivity.tlsByHost.isEmpty || !nameOverrides.isEmpty
        else { return defaultRoute }
        let scheme = request.head.scheme?.lowercased() ?? "http"
        let (host, port) = request.server
        var pinIndex: Int?
        var tlsIndex: Int?
        if scheme == "https" {
            pinIndex = pinning?.index(for: host)
            tlsIndex = connectivity.tlsIndex(for: host)
        }
        var chosen: Proxy?
        if let proxy, !scheme.hasSuffix("+unix") {
            chosen = proxy.proxy(forScheme: scheme, host: host, port: port)
            if let address = chosen.map(ProxyAddress.init), let answered = challengeCredentials.withLockedValue({ $0[address] }) {
                chosen?.credentials = answered
            }
        }
        if let proxy = chosen, proxy.kind == .http, scheme == "http", !proxy.tunnelsPlainHTTP {
            return Route(client: httpClient, pins: nil, hint: nil, proxy: proxy, forwardsToProxy: true)
        }
        // A host's override (the proxy, if any, resolves names itself), on a route of its own
        // whose connections check the certificate against the host's name.
        var nameOverride: NameOverrideRoute?
        if chosen == nil, !scheme.hasSuffix("+unix"), let address = nameOverrides.address(host: host, port: port) {
            nameOverride = NameOverrideRoute(host: host, address: address, checksCertificateName: scheme == "https")
        }
        guard chosen != nil || tlsIndex != nil || nameOverride != nil else {
            return pinIndex.map { pinnedRoutes[$0] } ?? defaultRoute
        }
        return try onDemandRoute(RouteKey(pinIndex: pinIndex, tlsIndex: tlsIndex, proxy: chosen, nameOverride: nameOverride))
    }

    /// The proxy's host when one carries `request`, then the URL's host or the address its
    /// name override gives, as the transport routes its connections.
    public func hostsReached(by request: Request) -> [String] {
        let (host, port) = request.server
        return connectivity.hostsReached(scheme: request.head.scheme?.lowercased() ?? "http", host: host, port: port, overrides: nameOverrides)
    }

    /// The most clients a transport makes on demand. Each keeps its own connections, and none
    /// is let go while the transport lives: a proxy rule that named a new proxy for every host
    /// would otherwise grow them without end.
    static let maximumOnDemandRoutes = 64

    /// The client for `key`, made the first time a request needs it.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when it would be one more than
    ///   ``maximumOnDemandRoutes``.
    private func onDemandRoute(_ key: RouteKey) throws -> Route {
        try onDemandRoutes.withLockedValue { routes in
            if let route = routes[key] { return route }
            guard routes.count < Self.maximumOnDemandRoutes else {
                throw TrellisError.invalidRequest(InvalidRequest(.url, """
                    the client already has \(Self.maximumOnDemandRoutes) routes (each pair of a proxy and TLS settings, \
                    with the connections of its own), and this request would need one more\(key.proxy.map { " (through \($0))" } ?? ""): \
                    a proxy rule should name a few proxies, not one per destination
                    """))
            }
            var configuration = onDemandConfiguration
            if let proxy = key.proxy { configuration = Self.configuration(configuration, through: proxy) }
            if let tlsIndex = key.tlsIndex {
                configuration.tlsConfiguration = connectivity.tlsByHost[tlsIndex].settings.applied(to: baseTLS)
            }
            if let override = key.nameOverride {
                configuration.dnsOverride[override.host] = override.address
                if override.checksCertificateName, configuration.tlsConfiguration?.certificateVerification ?? .fullVerification == .fullVerification {
                    configuration = Self.configuration(configuration, checking: CertificateNameCheck(host: override.host, reason: .nameOverride))
                }
            }
            if let name = key.socketServerName, configuration.tlsConfiguration?.certificateVerification ?? .fullVerification == .fullVerification {
                // The chain is checked as ever; the name, by the check after the handshake.
                var tls = configuration.tlsConfiguration ?? .makeClientConfiguration()
                tls.certificateVerification = .noHostnameVerification
                configuration.tlsConfiguration = tls
                configuration = Self.configuration(configuration, checking: CertificateNameCheck(host: name, reason: .socket))
            }
            let pins = key.pinIndex.map { pinning!.hosts[$0] }
            if let pins { configuration = Self.configuration(configuration, checking: pins) }
            let hint = ConnectionLoopHint(group: HTTPClient.defaultEventLoopGroup)
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.configuration(configuration, watchedBy: hint))
            let route = Route(client: client, pins: pins, hint: hint, proxy: key.proxy)
            routes[key] = route
            return route
        }
    }

    /// The hints of the clients the transport made, the default one first; for tests.
    var loopHints: [ConnectionLoopHint] {
        ([defaultRoute] + pinnedRoutes).compactMap(\.hint)
    }

    /// Sends the request; AsyncHTTPClient's deadline (the limits') bounds the wait for the
    /// response head. A buffered call's body is read by the deadline too; a streamed body
    /// streams as the caller reads it, watched for the idle timeout.
    ///
    /// A buffered call with no body, or with one in memory made alone, goes through
    /// AsyncHTTPClient's delegate API, whose deadline covers the whole exchange and which
    /// gathers the body on the event loop. A call with a body goes through the async API
    /// (`sendThroughAsyncAPI(_:within:through:)`) instead when other calls are under way, or
    /// when the client is one the caller brought: its delegate would run on a loop other than
    /// its connection's as often as not, and the body would be written through that loop,
    /// keeping the connection busy longer. A call made alone through a client the transport
    /// made runs its delegate on its connection's loop (see `ConnectionLoopHint`).
    public func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        if let invalidNameOverride { throw invalidNameOverride }
        let route = try route(for: request)
        guard let proxy = route.proxy else { return try await send(request, within: limits, through: route) }
        do {
            return try await send(request, within: limits, through: route)
        } catch let error
            where ProxyErrors.isChallenge(error) && self.proxy?.credentialsForChallenge != nil && (request.body?.isReplayable ?? true)
        {
            // A tunnel is refused before the body is read; a forwarded request's body has gone
            // to the proxy, and is sent again only if it can be.
            return try await answeringChallenge(of: proxy, to: request, within: limits, failure: error)
        } catch {
            throw ProxyErrors.naming(proxy, origin: request.head.authority ?? "", in: error)
        }
    }

    /// Asks ``ProxySettings/credentialsForChallenge`` for credentials for `proxy`, which
    /// answered `407`, and sends `request` once more with them; a second `407` ends the call.
    /// The tunnel failed before any of the request went out, so its body is unread.
    private func answeringChallenge(
        of proxy: Proxy,
        to request: Request,
        within limits: ExchangeLimits,
        failure: any Error
    ) async throws -> Response<ResponseBody> {
        let origin = request.head.authority ?? ""
        guard let answer = self.proxy?.credentialsForChallenge, let credentials = try await answer(proxy) else {
            throw ProxyErrors.naming(proxy, origin: origin, in: failure)
        }
        challengeCredentials.withLockedValue { $0[ProxyAddress(proxy)] = credentials }
        let route = try route(for: request)
        do {
            return try await send(request, within: limits, through: route)
        } catch {
            throw ProxyErrors.naming(route.proxy ?? proxy, origin: origin, in: error)
        }
    }

    /// Sends the request through `route`'s client, or forwards it to the route's proxy.
    private func send(_ request: Request, within limits: ExchangeLimits, through route: Route) async throws -> Response<ResponseBody> {
        if route.forwardsToProxy, let proxy = route.proxy {
            let connectTimeout = onDemandConfiguration.timeout.connect ?? .seconds(10)
            let forwarding = ProxyForwarding(proxy: proxy, connectTimeout: connectTimeout)
            if let cancellation = limits.cancellation { return try await cancellation.run { try await forwarding.send(request, within: limits) } }
            return try await forwarding.send(request, within: limits)
        }
        // Every call counts, whichever way it goes, so that a call overlapping one with a
        // body (or a stream) is known not to be alone.
        let preferred = route.hint?.begin()
        defer { route.hint?.end() }
        // A body in memory made alone takes the delegate API through a proxy as well: that API
        // flushes the head apart from the body, but `ProxyRelayTiming` holds that flush for the
        // body's write, so a proxy that relays with Nagle's algorithm on (tinyproxy) still reads
        // the two together.
        let bodyGoesAlone = request.body?.bytes != nil && preferred != nil
        if let bufferLimit = limits.bufferLimit, request.body == nil || bodyGoesAlone {
            return try await sendBuffered(request, upTo: bufferLimit, within: limits, through: route, preferring: preferred)
        }
        // AsyncHTTPClient's async API is cancelled with the task it runs in.
        if let cancellation = limits.cancellation {
            return try await cancellation.run { try await self.sendThroughAsyncAPI(request, within: limits, through: route) }
        }
        return try await sendThroughAsyncAPI(request, within: limits, through: route)
    }
}
