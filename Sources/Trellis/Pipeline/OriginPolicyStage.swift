/// Refuses, on every hop and before anything is sent, a request the client must not send: a
/// plain `http://` one its ``PlainHTTPPolicy`` refuses for where its connection would go, or any
/// request when the client's pins are not its transport's (it would go out unchecked).
struct OriginPolicyStage: Stage {
    let plainHTTP: PlainHTTPPolicy
    let pinningConflict: TrellisError?
    /// What carries the hop: the transport, whose route the plain-HTTP rule judges, unless the
    /// call ends elsewhere (a WebSocket's connection, ``CallContext/hostsReached``).
    let transport: any Transport

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        if let pinningConflict { throw pinningConflict }
        if plainHTTP != .allowed {
            let hosts = call.hostsReached?(request) ?? transport.hostsReached(by: request)
            try plainHTTP.check(request, reaching: hosts)
        }
        return try await next(request, call)
    }
}
