import Crypto
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOSOCKS
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import NIOWebSocket

/// Opens WebSocket connections: TCP, TLS with the client's pins, the HTTP/1.1 upgrade.
enum WebSocketDialer {
    enum Outcome: Sendable {
        case upgraded(WebSocketLink)
        /// The server answered the upgrade request with another status.
        case refused(HTTPResponse)
    }

    private enum UpgradeResult: Sendable {
        case upgraded(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, any Channel, NIOLockedValueBox<WebSocketClosure?>)
        case refused(HTTPResponse)
    }

    /// Connects to `request`'s URL (`http` or `https`, standing for `ws` and `wss`) and sends
    /// the upgrade with the request's header fields.
    ///
    /// The client's `connectivity` applies as to its other calls: the proxy (a `CONNECT`
    /// tunnel, or SOCKS5), name overrides and TLS.
    static func dial(
        _ request: Request,
        options: WebSocketSettings,
        pins: PinnedHost?,
        connectivity: Client.Configuration.Connectivity,
        limits: ExchangeLimits
    ) async throws -> Outcome {
        guard let url = request.url, let host = url.host, !host.isEmpty else {
            throw TrellisError.invalidRequest(InvalidRequest(.url, "\(RequestLog.redactedURL(request)) has no host to open a WebSocket to"))
        }
        let secure = url.scheme?.lowercased() == "https"
        let port = url.port ?? (secure ? 443 : 80)
        let authority = request.head.authority ?? host
        let hostName = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let proxy = connectivity.proxy?.proxy(forScheme: secure ? "https" : "http", host: hostName, port: port)
        let connectHost = proxy == nil ? try NameOverrides(connectivity.nameOverrides).address(host: hostName, port: port) ?? hostName : hostName
        let tlsContext: NIOSSLContext?
        let nameCheck: CertificateNameCheck?
        if secure {
            var tls = options.tlsConfiguration ?? .makeClientConfiguration()
            let hostTLS = connectivity.tls(for: hostName)
            if !hostTLS.isDefault { tls = hostTLS.applied(to: tls) }
            if let pins { tls = pins.enforcing(on: tls) }
            // An overridden name's certificate must name the host, not the address connected to.
            let overridden = connectHost != hostName && tls.certificateVerification == .fullVerification
            nameCheck = overridden ? CertificateNameCheck(host: hostName) : nil
            do {
                tlsContext = try NIOSSLContext(configuration: tls)
            } catch {
                throw TrellisError.tlsFailed(ConnectionFailure(host: authority, reason: "the TLS configuration is invalid: \(error)", underlying: error))
            }
        } else {
            tlsContext = nil
            nameCheck = nil
        }
        var target = url.path(percentEncoded: true)
        if target.isEmpty { target = "/" }
        if let query = url.query(percentEncoded: true) { target += "?" + query }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: authority)
        request.forEachWireField { name, value in
            if name.lowercased() != "host" { headers.add(name: name, value: value) }
        }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target, headers: headers)
        let sniName = CanonicalHost.isIPAddress(hostName) ? nil : hostName
        let timeout = options.connectTimeout
        let control = (options.pingInterval, options.pingTimeout)
        let maximumFrameSize = min(max(options.maximumMessageSize, 1 << 14), Int(UInt32.max))

        let result: UpgradeResult
        do {
            let upgrade = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(TimeAmount(timeout))
                .connect(host: proxy?.host ?? connectHost, port: proxy?.port ?? port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let proxy {
                            try channel.pipeline.syncOperations.addHandler(Self.tunnel(through: proxy, to: connectHost, port: port))
                        }
                        let promise = channel.eventLoop.makePromise(of: UpgradeResult.self)
                        let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                            promise.fail(TrellisError.timedOut(TimeoutFailure(timeout: timeout, request: "WebSocket upgrade of \(RequestLog.redactedURL(request))")))
                            channel.close(promise: nil)
                        }
                        promise.futureResult.whenComplete { _ in deadline.cancel() }
                        let openingHandshake: @Sendable () throws -> Void = {
                            try Self.addOpeningHandshake(
                                to: channel,
                                head: head,
                                maximumFrameSize: maximumFrameSize,
                                control: control,
                                promise: promise
                            )
                        }
                        if let tlsContext {
                            let tls = try NIOSSLClientHandler(context: tlsContext, serverHostname: sniName)
                            try channel.pipeline.syncOperations.addHandler(tls)
                            try channel.pipeline.syncOperations.addHandler(
                                HandshakeGate(pins: pins, nameCheck: nameCheck, host: authority, promise: promise, onVerified: openingHandshake)
                            )
                        } else {
                            try openingHandshake()
                        }
                        return promise.futureResult
                    }
                }
            result = try await upgrade.get()
        } catch {
            // The same SwiftNIO and SwiftNIO SSL errors as beneath AsyncHTTPClient.
            let translated = TransportErrors.translate(error, host: authority, timeout: limits.timeout, request: request, pins: pins)
            guard let proxy else { throw translated }
            throw ProxyErrors.naming(proxy, origin: authority, in: translated)
        }
        switch result {
        case .upgraded(let asyncChannel, let channel, let closeFrame):
            return .upgraded(await WebSocketLink.hold(asyncChannel, channel: channel, closeFrame: closeFrame))
        case .refused(let head):
            return .refused(head)
        }
    }

    /// The handler that opens the way to `host:port` through `proxy`, first in the pipeline.
    private static func tunnel(through proxy: Proxy, to host: String, port: Int) -> any ChannelHandler {
        switch proxy.kind {
        case .http:
            return ProxyTunnelHandler(host: host, port: port, credentials: proxy.credentials)
        case .socks5:
            let address: SOCKSAddress = (try? SocketAddress(ipAddress: host, port: port)).map { .address($0) } ?? .domain(host, port: port)
            return SOCKSClientHandler(targetAddress: address)
        }
    }

    private static func addOpeningHandshake(
        to channel: any Channel,
        head: HTTPRequestHead,
        maximumFrameSize: Int,
        control: (Duration?, Duration),
        promise: EventLoopPromise<UpgradeResult>
    ) throws {
        let handshake = WebSocketHandshake(head: head, maximumFrameSize: maximumFrameSize) { channel in
            let closeFrame = NIOLockedValueBox<WebSocketClosure?>(nil)
            try channel.pipeline.syncOperations.addHandler(
                WebSocketControlHandler(pingInterval: control.0, pingTimeout: control.1, closeFrame: closeFrame)
            )
            let asyncChannel = try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(
                wrappingChannelSynchronously: channel,
                configuration: .init(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8))
            )
            promise.succeed(.upgraded(asyncChannel, channel, closeFrame))
        } refused: { response in
            promise.succeed(.refused(response))
        } failed: { error in
            promise.fail(error)
        }
        try channel.pipeline.syncOperations.addHandler(handshake)
    }
}
