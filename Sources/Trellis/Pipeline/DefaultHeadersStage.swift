/// Fills in what a request's body implies and the caller left out: `Content-Type` from the
/// body (JSON, a form, a multipart boundary). On every hop, since a redirect may drop the body.
struct DefaultHeadersStage: OptionalStage {
    func isNeeded(for request: Request) -> Bool {
        request.body?.defaultContentType != nil && request.headerFields[.contentType] == nil
    }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        guard let type = request.body?.defaultContentType, request.headerFields[.contentType] == nil else {
            return try await next(request)
        }
        var request = request
        request.headerFields[.contentType] = type
        return try await next(request)
    }
}
