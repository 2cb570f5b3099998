/// Refuses, on every hop and before anything is sent, a request the client must not send: a
/// plain `http://` one its ``PlainHTTPPolicy`` refuses, or any request when the client's pins
/// are not its transport's (it would go out unchecked).
struct OriginPolicyStage: InlineStage {
    let plainHTTP: PlainHTTPPolicy
    let pinningConflict: TrellisError?

    func prepare(_ request: inout Request) throws {
        if let pinningConflict { throw pinningConflict }
        if plainHTTP != .allowed { try plainHTTP.check(request) }
    }
}
