/// Refuses, on every hop and before anything is sent, a request the client must not send: a
/// plain `http://` one its ``PlainHTTPPolicy`` refuses, or any request when the client's pins
/// are not its transport's (it would go out unchecked).
struct OriginPolicyStage: Stage {
    let plainHTTP: PlainHTTPPolicy
    let pinningConflict: TrellisError?

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        if let pinningConflict { throw pinningConflict }
        if plainHTTP != .allowed { try plainHTTP.check(request) }
        return try await next(request, call)
    }
}
