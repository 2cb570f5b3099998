/// Sends one request over the network and returns the response as it arrives.
///
/// A transport does that and nothing else: no retries, no redirects of its own choosing, no
/// decoding unless it says so (``decodesContentEncoding``). With each request it is given the
/// ``ExchangeLimits`` it must hold the exchange to: the deadline, the body limit of a
/// buffered call, and the idle timeout of a streamed body. It stops when the calling task is
/// cancelled, and reports failures as ``TrellisError`` (and cancellation as
/// `CancellationError`).
///
/// A transport of your own can honour the limits by sending through
/// ``ExchangeLimits/enforce(for:_:)``:
///
/// ```swift
/// struct MyTransport: Transport {
///     func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
///         try await limits.enforce(for: request) { try await myExchange(request) }
///     }
/// }
/// ```
public protocol Transport: Sendable {
    /// Sends `request` and returns the response head with a body: in memory by
    /// `limits.deadline` for a buffered exchange (``ExchangeLimits/bufferLimit`` set), still
    /// to be read for a streamed one.
    func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody>

    /// Whether the transport decodes compressed bodies (`Content-Encoding`) itself, so that
    /// the client must not decode them again; `false` unless the transport says otherwise.
    var decodesContentEncoding: Bool { get }

    /// Whether the transport cancels an exchange itself when the client calls its attempt off
    /// (the first attempt of a hedged call, once a hedge has answered); `false` unless the
    /// transport says otherwise, and then the client runs such an exchange in a task of its
    /// own, which it cancels. ``AsyncHTTPClientTransport`` cancels its own, which spares a
    /// task per hedged call.
    var cancelsCalledOffExchanges: Bool { get }

    /// Every host or address `request`'s connection reaches, in order: the proxy's when a proxy
    /// carries it, then the origin's, which is the URL's host or the address a name override
    /// connects to in its place.
    ///
    /// The client's ``PlainHTTPPolicy`` judges each of them before a plain `http://` request
    /// leaves, so that a rule about loopback holds for where the bytes go, not only for the
    /// name in the URL. The default is the URL's host alone, for a transport that connects
    /// where the URL says; a transport that routes elsewhere says where.
    func hostsReached(by request: Request) -> [String]

    /// Whether the transport checks certificate pins itself, so that a client can tell when
    /// its own pins (``Client/pinning``) are not the ones the transport checks; `false` unless
    /// the transport says otherwise (a transport of your own checks, or mocks, what it will).
    var checksPins: Bool { get }

    /// The pins the transport checks, when ``checksPins`` is `true`; `nil` for none.
    var pinning: CertificatePinning? { get }
}

extension Transport {
    public var decodesContentEncoding: Bool { false }

    public var cancelsCalledOffExchanges: Bool { false }

    public func hostsReached(by request: Request) -> [String] { [request.server.host] }

    public var checksPins: Bool { false }

    public var pinning: CertificatePinning? { nil }
}

/// The transports Trellis ships, and the one it picks for you.
public enum Transports {
    /// AsyncHTTPClient on Linux (5-7 times the request rate of FoundationNetworking's
    /// URLSession there, with control over TLS trust); URLSession on Apple platforms.
    public static var platformDefault: any Transport {
        #if canImport(Darwin)
        URLSessionTransport.shared
        #else
        AsyncHTTPClientTransport.shared
        #endif
    }

    /// A new platform default transport that checks `pinning`; it owns its connections, which
    /// are never shared with unpinned clients.
    public static func platformDefault(pinning: CertificatePinning) -> any Transport {
        #if canImport(Darwin)
        URLSessionTransport(pinning: pinning)
        #else
        AsyncHTTPClientTransport(pinning: pinning)
        #endif
    }

    /// The transport for a client with these pins and connectivity settings: the shared
    /// platform default when there are neither, a transport of the client's own otherwise.
    static func platformDefault(pinning: CertificatePinning?, connectivity: Client.Configuration.Connectivity) -> any Transport {
        if connectivity.isDefault {
            return pinning.map(platformDefault(pinning:)) ?? platformDefault
        }
        // URLSession can be given neither a proxy per destination, nor name overrides, nor a
        // PEM identity (see `URLSessionConnectivity`): AsyncHTTPClient applies them all, on
        // Apple platforms too, so every client's settings mean the same everywhere.
        return AsyncHTTPClientTransport(pinning: pinning, connectivity: connectivity)
    }
}
