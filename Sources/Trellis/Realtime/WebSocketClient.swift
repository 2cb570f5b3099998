import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore

extension Client {
    /// Opens a WebSocket to `request`'s URL (`ws://`, `wss://`, or `http://` and `https://`
    /// standing for them) and returns the open conversation.
    ///
    /// The upgrade request goes through the client's middlewares and carries the access token
    /// when the request requires one; a 401 refreshes the token and tries once more, as for
    /// any request. `wss://` uses the client's pins (``Client/pinning``), checked as the TLS
    /// handshake completes, before the upgrade request (and its token) is sent. The connection
    /// runs on SwiftNIO on every platform (FoundationNetworking has no WebSockets).
    ///
    /// - Throws: ``TrellisError/unacceptableStatus(_:)`` when the server answers the upgrade
    ///   with another status, or the connection and TLS errors of any request.
    ///
    /// - Parameter extraMiddlewares: run after the client's own (a service's interceptors).
    public func webSocket(
        for request: Request,
        options: WebSocketOptions = WebSocketOptions(),
        middlewares extraMiddlewares: [any Middleware] = []
    ) async throws -> WebSocketConnection {
        var request = request
        switch request.head.scheme?.lowercased() {
        case "ws": request.head.scheme = "http"
        case "wss": request.head.scheme = "https"
        case "http", "https": break
        default:
            throw TrellisError.invalidRequest(InvalidRequest(.url, "\(request.urlString) is not a ws://, wss://, http:// or https:// URL"))
        }
        request.head.method = .get
        if let pinningConflict { throw pinningConflict }
        if plainHTTP != .allowed { try plainHTTP.check(request) }
        try await checkPreconditions(of: request)
        let host = request.head.authority ?? ""
        let pins = request.head.scheme == "https" ? pinning?.pins(for: PlainHTTPPolicy.host(of: host)) : nil
        let limit = request.timeout ?? timeout
        let upgrade = request
        let open: @Sendable () async throws -> WebSocketLink = { [self] in
            var attempt = upgrade
            attempt.timeout = limit
            attempt.deadline = .now + limit
            let opened = NIOLockedValueBox<WebSocketLink?>(nil)
            let response = try await runChain(attempt, at: 0, extra: extraMiddlewares) { authorized in
                // This runs again when the token is refreshed, or a middleware sends twice: only
                // the last connection opened is kept.
                opened.withLockedValue { $0?.abort() }
                switch try await WebSocketDialer.dial(authorized, options: options, pins: pins) {
                case .upgraded(let link):
                    opened.withLockedValue { $0 = link }
                    return Response(head: HTTPResponse(status: .switchingProtocols), body: ResponseBody())
                case .refused(let head):
                    opened.withLockedValue { $0 = nil }
                    return Response(head: head, body: ResponseBody())
                }
            }
            if response.status == .switchingProtocols, let link = opened.withLockedValue({ $0 }) {
                return link
            }
            opened.withLockedValue { $0?.abort() }
            throw await statusFailure(response, for: attempt)
        }
        let link = try await open()
        return WebSocketConnection(link: link, host: host, options: options, encoder: encoder, decoder: decoder, open: open)
    }
}
