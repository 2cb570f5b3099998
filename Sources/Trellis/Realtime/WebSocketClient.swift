import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore

extension Client {
    /// Opens a WebSocket to `request`'s URL (`ws://`, `wss://`, or `http://` and `https://`
    /// standing for them) and returns the open conversation.
    ///
    /// The upgrade request goes through the client's pipeline and carries the access token
    /// when the request requires one; a 401 refreshes the token and tries once more, as for
    /// any request. A connection whose upgrade a middleware then refuses (by throwing) is
    /// closed. `wss://` uses the client's pins (``Client/pinning``), checked as the TLS
    /// handshake completes, before the upgrade request (and its token) is sent. The connection
    /// runs on SwiftNIO on every platform (FoundationNetworking has no WebSockets).
    ///
    /// - Throws: ``TrellisError/unacceptableStatus(_:)`` when the server answers the upgrade
    ///   with another status, or the connection and TLS errors of any request.
    public func webSocket(
        for request: Request,
        settings: WebSocketSettings = WebSocketSettings()
    ) async throws -> WebSocketConnection {
        var request = request
        switch request.head.scheme?.lowercased() {
        case "ws": request.head.scheme = "http"
        case "wss": request.head.scheme = "https"
        case "http", "https": break
        default:
            throw TrellisError.invalidRequest(InvalidRequest(.url, "\(RequestLog.redactedURL(request)) is not a ws://, wss://, http:// or https:// URL"))
        }
        request.head.method = .get
        let host = request.head.authority ?? ""
        let upgrade = request
        // The dialer connects as the client's connectivity settings say, whatever its transport.
        let connectivity = configuration.connectivity
        let overrides = (try? NameOverrides(connectivity.nameOverrides)) ?? NameOverrides()
        let hostsReached: @Sendable (Request) -> [String] = { hop in
            let (host, port) = hop.server
            return connectivity.hostsReached(scheme: hop.head.scheme?.lowercased() ?? "http", host: host, port: port, overrides: overrides)
        }
        let open: @Sendable () async throws -> WebSocketLink = { [self] in
            let opened = NIOLockedValueBox<WebSocketLink?>(nil)
            let response: Response<ResponseBody>
            do {
                response = try await pipeline.send(upgrade, hostsReached: hostsReached) { authorized, call in
                    // This runs again when the token is refreshed, or a middleware sends twice:
                    // only the last connection opened is kept.
                    opened.withLockedValue { $0?.abort() }
                    // The pins of this hop's host: a redirect may lead elsewhere.
                    let pins = authorized.head.scheme == "https"
                        ? self.pinning?.pins(for: PlainHTTPPolicy.host(of: authorized.head.authority ?? "")) : nil
                    switch try await WebSocketDialer.dial(authorized, options: settings, pins: pins, connectivity: self.configuration.connectivity, limits: call.limitsOfAttempt) {
                    case .upgraded(let link):
                        opened.withLockedValue { $0 = link }
                        return Response(head: HTTPResponse(status: .switchingProtocols), body: ResponseBody())
                    case .refused(let head):
                        opened.withLockedValue { $0 = nil }
                        return Response(head: head, body: ResponseBody())
                    }
                }
            } catch {
                // A middleware that refused the upgrade's response: the connection it opened
                // must not stay open (and ping) with nobody to use it.
                opened.withLockedValue { $0?.abort() }
                throw error
            }
            if response.status == .switchingProtocols, let link = opened.withLockedValue({ $0 }) {
                return link
            }
            opened.withLockedValue { $0?.abort() }
            throw await statusFailure(response, for: upgrade)
        }
        let link = try await open()
        return WebSocketConnection(link: link, host: host, options: settings, clock: configuration.clock, encoder: encoder, decoder: decoder, open: open)
    }

    /// ``webSocket(for:settings:)`` under its former label.
    @available(*, deprecated, renamed: "webSocket(for:settings:)")
    public func webSocket(for request: Request, options: WebSocketSettings) async throws -> WebSocketConnection {
        try await webSocket(for: request, settings: options)
    }
}
