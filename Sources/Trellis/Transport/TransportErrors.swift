import AsyncHTTPClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// What the network's failures are as ``TrellisError``, for every transport and the WebSocket
/// dialer: SwiftNIO's, SwiftNIO SSL's and AsyncHTTPClient's errors, and URLSession's
/// `URLError`s. Cancellation stays `CancellationError`.
enum TransportErrors {
    /// `error`, which the exchange of `request` with `host` met, as ``TrellisError``;
    /// cancellation as `CancellationError`. `timeout` is what a timeout names; `pins`, those
    /// the connection checked.
    static func translate(
        _ error: any Error,
        host: String,
        timeout: Duration,
        request: Request,
        pins: PinnedHost? = nil
    ) -> any Error {
        if error is CancellationError || error is TrellisError { return error }
        if let urlError = error as? URLError {
            return translate(urlError, host: host, timeout: timeout, request: request)
        }
        if let mismatch = error as? PinMismatch {
            return TrellisError.pinningFailed(ConnectionFailure(host: host, reason: mismatch.reason, underlying: error))
        }
        if let mismatch = error as? CertificateNameMismatch {
            return TrellisError.tlsFailed(ConnectionFailure(host: host, reason: mismatch.description, underlying: error))
        }
        if let clientError = error as? HTTPClientError {
            switch clientError {
            case .cancelled, .requestStreamCancelled:
                // AsyncHTTPClient also reports a request it gave up on itself as cancelled: an
                // HTTP/2 stream the server reset can end that way. Only the caller's own
                // cancellation is a `CancellationError`.
                guard !Task.isCancelled else { return CancellationError() }
                return TrellisError.connectionFailed(ConnectionFailure(
                    host: host, reason: "AsyncHTTPClient gave up on the exchange before the response was complete", underlying: clientError
                ))
            case .connectTimeout:
                return TrellisError.connectionFailed(
                    ConnectionFailure(host: host, reason: "no connection within the connect timeout", underlying: clientError)
                )
            case .deadlineExceeded, .readTimeout, .writeTimeout, .getConnectionFromPoolTimeout, .tlsHandshakeTimeout:
                return TrellisError.timedOut(TimeoutFailure(timeout: timeout, request: RequestLog.summary(request)))
            case .remoteConnectionClosed:
                var failure = ConnectionFailure(
                    host: host, reason: "the server closed the connection before the response was complete", underlying: clientError
                )
                failure.mayBeStaleConnection = true
                return TrellisError.connectionFailed(failure)
            case .bodyLengthMismatch:
                return TrellisError.connectionFailed(
                    ConnectionFailure(host: host, reason: "the body was shorter or longer than its Content-Length", underlying: clientError)
                )
            case .invalidURL, .emptyHost, .emptyScheme:
                return TrellisError.invalidRequest(InvalidRequest(.url, "\(RequestLog.redactedURL(request)) cannot be sent: \(clientError)"))
            default:
                return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "\(clientError)", underlying: clientError))
            }
        }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            if let pins, !pins.anchors.isEmpty {
                // The pinned CA certificates are the only trust roots: a chain the TLS stack
                // rejects does not lead to one of them.
                return TrellisError.pinningFailed(ConnectionFailure(
                    host: host,
                    reason: "the server's certificate chain does not lead to a pinned CA certificate (\(error))",
                    underlying: error
                ))
            }
            return TrellisError.tlsFailed(ConnectionFailure(host: host, reason: "\(error)", underlying: error))
        }
        if let refused = error as? RefusedStatus {
            return notHTTP("the status \(refused.status) is not one of 100 to 999", version: refused.version, host: host, underlying: error)
        }
        if let closed = error as? NIOHTTP2Errors.StreamClosed {
            var reason = "the HTTP/2 stream was closed with \(Self.name(of: closed.errorCode)) before the response was complete"
            // SwiftNIO closes a stream so itself when the answer breaks HTTP/2 (no `:status`, a
            // body longer or shorter than its `content-length`); a server closes one so when
            // it takes the request for broken. Sending it again would meet the same end.
            let brokeHTTP2 = closed.errorCode == .protocolError
            if brokeHTTP2 { reason += " (an answer without :status, or with a body its content-length does not match, ends so)" }
            var failure = ConnectionFailure(host: host, reason: reason, underlying: error)
            failure.isProtocolViolation = brokeHTTP2
            return TrellisError.connectionFailed(failure)
        }
        if let broken = error as? BrokenHTTP2Connection {
            return notHTTP(
                "a frame could not be parsed: a header block past SwiftNIO's 16 KB once decoded, or bytes that are not HTTP/2",
                version: "HTTP/2", host: host, underlying: broken.cause
            )
        }
        if let leftover = error as? LeftoverBytes {
            var failure = ConnectionFailure(
                host: host,
                reason: "the answer on a reused connection began with bytes the previous answer left behind (\(leftover.cause))",
                underlying: leftover.cause
            )
            failure.failedOnReusedConnection = true
            return TrellisError.connectionFailed(failure)
        }
        if let parserError = error as? HTTPParserError {
            var failure = ConnectionFailure(host: host, reason: Self.describe(parserError), underlying: error)
            // A response cut off by the connection's end is a broken connection, not a
            // malformed answer.
            failure.isProtocolViolation = parserError != .invalidEOFState
            return TrellisError.connectionFailed(failure)
        }
        if case ChannelError.ioOnClosedChannel = error {
            // Met when a request is to go out on a pooled connection that has just closed: a
            // stale connection's break, unless part of an answer had come (the callers clear it
            // then).
            var failure = ConnectionFailure(host: host, reason: "the connection closed under the request (I/O on closed channel)", underlying: error)
            failure.mayBeStaleConnection = true
            return TrellisError.connectionFailed(failure)
        }
        if case ChannelError.connectTimeout = error {
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "no connection within the connect timeout", underlying: error))
        }
        if let connectionError = error as? NIOConnectionError {
            if connectionError.connectionErrors.isEmpty, connectionError.dnsAError != nil || connectionError.dnsAAAAError != nil {
                return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "unknown host", underlying: error))
            }
            if let first = connectionError.connectionErrors.first?.error as? IOError {
                return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: Self.describe(first), underlying: error))
            }
        }
        if case .unknown = error as? SocketAddressError {
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "unknown host", underlying: error))
        }
        if let ioError = error as? IOError {
            var failure = ConnectionFailure(host: host, reason: Self.describe(ioError), underlying: ioError)
            failure.mayBeStaleConnection = ioError.errnoCode == ECONNRESET || ioError.errnoCode == EPIPE
            return TrellisError.connectionFailed(failure)
        }
        return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "\(error)", underlying: error))
    }

    /// What was wrong with a response SwiftNIO could not parse: its own texts name the parser's
    /// state ("invalid constant string"), not the fault.
    private static func describe(_ error: HTTPParserError) -> String {
        switch error {
        case .headerOverflow: "the response's header fields went past SwiftNIO's limit of 80 KB"
        case .invalidEOFState: "the server closed the connection before the response was complete"
        default: ConnectionFailure.notHTTP("\(error)")
        }
    }

    /// The failure of an answer that breaks the protocol: never retried, since the same server
    /// would answer the same way.
    private static func notHTTP(_ fault: String, version: String, host: String, underlying: any Error) -> TrellisError {
        var failure = ConnectionFailure(host: host, reason: ConnectionFailure.notHTTP(fault, version: version), underlying: underlying)
        failure.isProtocolViolation = true
        return TrellisError.connectionFailed(failure)
    }

    /// An HTTP/2 error code by its name in RFC 9113 (section 7); SwiftNIO's own text carries
    /// its source location.
    private static func name(of code: NIOHTTP2.HTTP2ErrorCode) -> String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
            "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return names.indices.contains(code.networkCode) ? names[code.networkCode] : "error code \(code.networkCode)"
    }

    private static func describe(_ error: IOError) -> String {
        switch error.errnoCode {
        case ECONNREFUSED: "connection refused"
        case ECONNRESET: "connection reset by the server"
        default: "\(error)"
        }
    }

    /// `error` with the URL it carries redacted as logs redact it: FoundationNetworking puts
    /// the whole URL, query and all, in the error's user info, which `dump(error)` and error
    /// reporters print, and an API key in the query would go with it.
    static func scrubbed(_ error: URLError, for request: Request) -> URLError {
        var userInfo = error.userInfo
        // The string form's key, spelled out: its constant is deprecated.
        userInfo.removeValue(forKey: "NSErrorFailingURLStringKey")
        userInfo.removeValue(forKey: NSUnderlyingErrorKey)
        userInfo[NSURLErrorFailingURLErrorKey] = URL(string: RequestLog.redactedURL(request))
        return URLError(error.code, userInfo: userInfo)
    }

    /// URLSession's errors (libcurl's, through FoundationNetworking, on Linux).
    private static func translate(_ reported: URLError, host: String, timeout: Duration, request: Request) -> any Error {
        let urlError = scrubbed(reported, for: request)
        let protocolViolation = { (reason: String) in
            var failure = ConnectionFailure(host: host, reason: reason, underlying: urlError)
            failure.isProtocolViolation = true
            return TrellisError.connectionFailed(failure)
        }
        switch urlError.code {
        case .cancelled:
            return CancellationError()
        case .timedOut:
            return TrellisError.timedOut(TimeoutFailure(timeout: timeout, request: RequestLog.summary(request)))
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected,
            .clientCertificateRequired:
            return TrellisError.tlsFailed(ConnectionFailure(host: host, reason: urlError.localizedDescription, underlying: urlError))
        case .cannotFindHost, .dnsLookupFailed:
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "unknown host", underlying: urlError))
        case .cannotConnectToHost:
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "connection refused", underlying: urlError))
        case .networkConnectionLost:
            var failure = ConnectionFailure(host: host, reason: "the connection was lost before the response was complete", underlying: urlError)
            failure.mayBeStaleConnection = true
            return TrellisError.connectionFailed(failure)
        case .unsupportedURL where ["http", "https"].contains(request.head.scheme?.lowercased()):
            // What libcurl did not support is then the answer: an HTTP/0.9 one, or another
            // protocol's.
            return protocolViolation(ConnectionFailure.notHTTP(urlError.localizedDescription))
        case .unknown where urlError.localizedDescription.hasPrefix("Too large response headers"):
            return protocolViolation("the response's header fields went past libcurl's limit of 300 KB (\(urlError.localizedDescription))")
        case _ where urlError.localizedDescription.hasSuffix("in chunked-encoding"):
            // libcurl's words for a chunked body whose framing is broken ("Illegal or missing
            // hexadecimal sequence in chunked-encoding"): the answer broke HTTP, as
            // AsyncHTTPClient's parser says of the same bytes.
            return protocolViolation(ConnectionFailure.notHTTP(urlError.localizedDescription))
        case .unknown where ["SSL", "certificate", "TLS"].contains(where: urlError.localizedDescription.contains):
            // FoundationNetworking reports libcurl's TLS failures (an untrusted certificate, a
            // failed handshake) as an unknown error carrying curl's message.
            return TrellisError.tlsFailed(ConnectionFailure(host: host, reason: urlError.localizedDescription, underlying: urlError))
        default:
            return TrellisError.connectionFailed(ConnectionFailure(host: host, reason: urlError.localizedDescription, underlying: urlError))
        }
    }
}
