import AsyncHTTPClient
import NIOCore
import NIOPosix
import NIOSOCKS

/// What a failure on the way through a proxy says: the proxy by name (never its password), and
/// what it did, in place of the transport's words about "the host".
enum ProxyErrors {
    /// Whether `error` is a proxy's `407 Proxy Authentication Required`.
    static func isChallenge(_ error: any Error) -> Bool {
        guard case .connectionFailed(let failure) = error as? TrellisError else { return false }
        return asksForCredentials(failure.underlying)
    }

    /// Whether `underlying` is a 407 to `CONNECT`, as AsyncHTTPClient or the WebSocket
    /// dialer's tunnel reports it.
    private static func asksForCredentials(_ underlying: (any Error)?) -> Bool {
        switch underlying {
        case let clientError as HTTPClientError: clientError == .proxyAuthenticationRequired
        case let refused as ProxyTunnelHandler.Refused: refused.status == 407
        default: false
        }
    }

    /// `error`, met by a request to `origin` through `proxy`, naming the proxy where the proxy
    /// is what failed: unreachable, asking for credentials, refusing the tunnel, or answering
    /// what is not a proxy's answer. Failures past the tunnel (the origin's own) pass unchanged.
    static func naming(_ proxy: Proxy, origin: String, in error: any Error) -> any Error {
        guard case .connectionFailed(let failure) = error as? TrellisError else { return error }
        let reason: String
        switch failure.underlying {
        case let underlying where asksForCredentials(underlying):
            reason = proxy.credentials == nil
                ? "the proxy asks for credentials (407) and none are configured"
                : "the proxy refused the credentials sent to it (407)"
        case let refused as ProxyTunnelHandler.Refused:
            reason = "the proxy refused the tunnel to \(origin) with the status \(refused.status)"
        case is ProxyTunnelHandler.NotHTTP:
            reason = "the proxy did not answer CONNECT as an HTTP proxy does"
        case let refused as SOCKSError.ConnectionFailed:
            reason = "the SOCKS proxy did not open the connection to \(origin) (its reply: \(refused.reply))"
        case is SOCKSError.InvalidProtocolVersion, is SOCKSError.NoValidAuthenticationMethod, is SOCKSError.InvalidServerState,
            is SOCKSError.InvalidReservedByte, is SOCKSError.InvalidAddressType, is SOCKSError.InvalidAuthenticationSelection:
            reason = "the proxy did not answer as a SOCKS5 proxy without authentication does (\(failure.reason))"
        case let clientError as HTTPClientError where clientError == .invalidProxyResponse:
            reason = "the proxy refused the tunnel to \(origin), or did not answer as an HTTP proxy does"
        case let clientError as HTTPClientError where clientError == .socksHandshakeTimeout:
            reason = "the SOCKS proxy did not complete its handshake"
        case let clientError as HTTPClientError where clientError == .connectTimeout:
            // AsyncHTTPClient waits out the connect timeout when the proxy's answer to CONNECT
            // cannot be parsed.
            reason = "the proxy did not open the tunnel within the connect timeout (it did not answer, or not as an HTTP proxy does)"
        case is NIOConnectionError, ChannelError.connectTimeout?:
            // The only connection a proxied client opens is to the proxy.
            reason = "the proxy cannot be reached: \(failure.reason)"
        case let ioError as IOError where [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH].contains(ioError.errnoCode):
            reason = "the proxy cannot be reached: \(failure.reason)"
        case let underlying? where isClosedBeforeEstablished(underlying):
            // AsyncHTTPClient's handlers of the SOCKS handshake, of CONNECT and of TLS fail with
            // a type of this name, local to each, when the connection closes before they are done.
            reason = proxy.kind == .socks5
                ? "the SOCKS proxy closed the connection before the tunnel to \(origin) was open (its reply was missing or cut short)"
                : "the proxy closed the connection before the tunnel to \(origin) was open (it did not answer CONNECT in full)"
        default:
            return error
        }
        return TrellisError.connectionFailed(ConnectionFailure(host: "\(proxy)", reason: reason, underlying: failure.underlying))
    }

    /// Whether `underlying` is AsyncHTTPClient's report of a connection closed while it was
    /// being set up, which has no type a caller can name.
    private static func isClosedBeforeEstablished(_ underlying: any Error) -> Bool {
        String(describing: type(of: underlying)) == "NoResult"
    }
}
