import Foundation
import HTTPTypes
import HTTPTypesFoundation
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A ``Transport`` over `URLSession`. The default on Apple platforms.
///
/// It streams response bodies through a session delegate, so it works the same on Linux's
/// FoundationNetworking, which has no `bytes(for:)`. Limits there, measured: no WebSockets,
/// no server-trust evaluation (a self-signed or pinned certificate cannot be accepted), and a
/// lower request rate than ``AsyncHTTPClientTransport``. A request body that is not in memory
/// (a file, a form, a stream) is first written to a temporary file and sent from there, so its
/// upload progress counts that copy rather than the network; and a response body is queued in
/// memory when it arrives faster than it is read.
public final class URLSessionTransport: Transport {
    /// The transport every client uses by default on Apple platforms.
    public static let shared = URLSessionTransport()

    private let session: URLSession
    private let delegate: SessionDelegate
    /// The deadlines of the streamed calls' heads (see `send`).
    private let headDeadlines = DeadlineTimer<URLSessionExchange> { $0.headTimedOut() }
    /// The pins this transport checks, if any.
    public let pinning: CertificatePinning?
    /// `true`: the transport checks ``pinning`` on its connections, none when it is `nil`.
    public var checksPins: Bool { true }

    /// A transport with its own session made from `configuration`, checking `pinning`.
    ///
    /// On Apple platforms the pins are evaluated in the session's server-trust challenge,
    /// before the request is sent. FoundationNetworking on Linux offers no server-trust
    /// challenge, so there a request to a pinned host fails with
    /// ``TrellisError/pinningFailed(_:)`` rather than go out unchecked: use
    /// ``AsyncHTTPClientTransport`` for pinning on Linux.
    ///
    /// The session's own cookie handling and cache are turned off (in a copy of
    /// `configuration`): the client's ``CookieJar`` and ``HTTPCache`` decide, the same over
    /// both transports.
    public convenience init(configuration: URLSessionConfiguration = .default, pinning: CertificatePinning? = nil) {
        self.init(configuration: configuration, pinning: pinning, applying: nil)
    }

    private init(configuration: URLSessionConfiguration, pinning: CertificatePinning?, applying connectivity: URLSessionConnectivity?) {
        let delegate = SessionDelegate(pinning: pinning, connectivity: connectivity)
        self.delegate = delegate
        self.pinning = pinning
        let configuration = (configuration.copy() as? URLSessionConfiguration) ?? configuration
        connectivity?.apply(to: configuration)
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        // The client's HTTPCache, when it has one, is the only cache.
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// A transport made from `configuration` with a client's connectivity settings, checking
    /// `pinning`.
    ///
    /// On Apple platforms URLSession applies a proxy for every destination
    /// (``ProxySettings/always(_:except:)``, ``ProxySettings/perScheme(http:https:except:)``, with
    /// its credentials), private trust, a client identity from PKCS#12 (through the session's
    /// challenges, per host pattern too), the minimum TLS version and the connections per host.
    /// It cannot apply a proxy chosen per destination, name overrides or a PEM identity. On
    /// Linux, FoundationNetworking ignores proxies and has no TLS challenges, so only the
    /// connections per host apply. What cannot be applied is refused, never left out: a request
    /// that should go through a proxy never goes direct. ``AsyncHTTPClientTransport`` applies
    /// them all, on every platform.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming the settings URLSession cannot apply.
    public convenience init(
        configuration: URLSessionConfiguration = .default,
        pinning: CertificatePinning? = nil,
        connectivity: Client.Configuration.Connectivity
    ) throws {
        let refused = URLSessionConnectivity.unsupported(in: connectivity)
        guard refused.isEmpty else {
            throw TrellisError.invalidRequest(.init(.url, "URLSessionTransport cannot apply \(refused.joined(separator: "; ")) here; use AsyncHTTPClientTransport"))
        }
        self.init(configuration: configuration, pinning: pinning, applying: URLSessionConnectivity(settings: connectivity))
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    /// URLSession decodes gzip and deflate bodies itself, and cannot be told not to.
    public var decodesContentEncoding: Bool { true }

    /// The proxy URLSession would send `request` through, if any, then the URL's host. On Apple
    /// platforms that is the proxy of the session's configuration, or else of the system's
    /// settings, as CFNetwork chooses it for the URL. On Linux, FoundationNetworking gives
    /// libcurl no proxy, and libcurl takes one from the environment for each transfer
    /// (`http_proxy`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`), as ``Proxy/fromEnvironment(_:)``
    /// reads them.
    public func hostsReached(by request: Request) -> [String] {
        let (host, port) = request.server
        #if canImport(Darwin)
        guard let url = request.url else { return [host] }
        return URLSessionConnectivity.proxyHosts(for: url, sessionProxies: session.configuration.connectionProxyDictionary) + [host]
        #else
        return URLSessionConnectivity.environmentProxyHosts(scheme: request.head.scheme ?? "http", host: host, port: port) + [host]
        #endif
    }

    /// Sends the request. A buffered call's whole exchange is held to the deadline by
    /// ``ExchangeLimits/enforce(for:_:)``; a streamed call's head is held to it here, and its
    /// body watched for the idle timeout.
    public func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        guard limits.bufferLimit == nil else {
            return try await limits.enforce(for: request) { try await self.exchange(request, within: limits) }
        }
        return limits.watchingIdleTime(try await exchange(request, within: limits), of: request)
    }

    private func exchange(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        guard let url = request.url else {
            throw TrellisError.invalidRequest(InvalidRequest(.url, "\(RequestLog.redactedURL(request)) is not a valid URL"))
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method.rawValue
        request.forEachWireField { name, value in urlRequest.addValue(value, forHTTPHeaderField: name) }
        #if !canImport(Darwin)
        if let pinning, url.scheme?.lowercased() == "https", let host = url.host, pinning.pins(for: host) != nil {
            throw TrellisError.pinningFailed(ConnectionFailure(
                host: request.head.authority ?? host,
                reason: "URLSession on Linux cannot check pins (FoundationNetworking has no server-trust challenge); use AsyncHTTPClientTransport"
            ))
        }
        #endif
        let timeout = limits.timeout
        // FoundationNetworking turns the interval into whole milliseconds for libcurl and traps
        // on a value too large for that: a longer wait than about 11 days is not one anybody
        // means, and the client's own deadline still applies.
        urlRequest.timeoutInterval = min(timeout.inSeconds, 1_000_000)
        let task: URLSessionDataTask
        var spool: String?
        if let body = request.body, body.bytes == nil {
            let path = try await Self.spool(body)
            spool = path
            task = session.uploadTask(with: urlRequest, fromFile: URL(fileURLWithPath: path))
        } else {
            if let bytes = request.body?.bytes {
                urlRequest.httpBody = Data(buffer: bytes, byteTransferStrategy: .noCopy)
            }
            task = session.dataTask(with: urlRequest)
        }
        let exchange = URLSessionExchange(task: task, delegateQueue: session.delegateQueue, request: request, limits: limits, spool: spool)
        // A streamed call's head is held to the deadline here: libcurl's timeout waits for the
        // next byte, and a server that sends a header line now and then never lets it fire. (A
        // buffered call's whole exchange is held to it by `send`.)
        let headDeadline = limits.bufferLimit == nil ? limits.nioDeadline : nil
        let headDeadlines = headDeadlines
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                exchange.start(continuation, delegate: delegate)
                if let headDeadline { exchange.holdHead(to: headDeadline, on: headDeadlines) }
            }
        } onCancel: {
            exchange.cancel()
        }
    }

    /// Writes a streamed body to a temporary file for `uploadTask(with:fromFile:)`, which
    /// sends it in constant memory: FoundationNetworking cannot send from an asynchronous
    /// sequence.
    private static func spool(_ body: RequestBody) async throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("trellis-upload-\(UUID().uuidString)").path
        do {
            let file = try await TransferFile.openForWriting(path, keeping: 0)
            var chunks = body.makeChunkIterator()
            var offset: Int64 = 0
            while let chunk = try await chunks.next() {
                try await file.write([chunk], at: offset)
                offset += Int64(chunk.readableBytes)
            }
            return path
        } catch {
            FileIO.remove(path)
            throw error
        }
    }
}

extension URLSessionTransport {
    /// What makes the length of a response's body unknowable, if anything.
    ///
    /// FoundationNetworking's libcurl reads on where RFC 9112 (section 6.3) has a client stop:
    /// it takes one of two differing `Content-Length` values, waits until the timeout for a
    /// body of a length no integer holds, and lets `Transfer-Encoding` win over a
    /// `Content-Length` beside it, which is how a response is smuggled past a proxy. SwiftNIO's
    /// parser refuses all three, so the transports agree.
    static func framingFault(of head: HTTPResponse) -> String? {
        guard let length = head.headerFields[.contentLength] else { return nil }
        if head.headerFields[.transferEncoding] != nil {
            return "it has both Content-Length and Transfer-Encoding"
        }
        // A list of one value repeated is one length (RFC 9110, section 8.6).
        let values = length.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let value = values.first, values.allSatisfy({ $0 == value }), !value.isEmpty, value.allSatisfy(\.isASCIIDigit),
            Int64(value) != nil
        else {
            return "Content-Length \"\(length)\" is not one length"
        }
        return nil
    }
}
