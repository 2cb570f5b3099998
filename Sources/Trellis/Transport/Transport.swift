/// Sends one request over the network and returns the response as it arrives.
///
/// A transport does that and nothing else: no retries, no redirects of its own choosing, no
/// decoding. It honours the request's ``Request/timeout`` until the response head arrives,
/// stops when the calling task is cancelled, and reports failures as ``TrellisError`` (and
/// cancellation as `CancellationError`).
public protocol Transport: Sendable {
    /// Sends `request` and returns the response head with a body still to be read.
    func send(_ request: Request) async throws -> Response<ResponseBody>
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
}
