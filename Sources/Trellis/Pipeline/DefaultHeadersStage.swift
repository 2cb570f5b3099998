import HTTPTypes

/// Fills in what the caller left out, on every hop (a redirect may drop the body): the
/// client's ``Client/Configuration/defaultHeaders``, and `Content-Type` from the body (JSON, a
/// form, a multipart boundary). A field the request has keeps the request's value.
struct DefaultHeadersStage: Stage {
    let defaultHeaders: HTTPFields

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        !defaultHeaders.isEmpty || (request.body?.defaultContentType != nil && !request.headerFields.contains(.contentType))
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var request = request
        if !defaultHeaders.isEmpty {
            let present = Set(request.headerFields.map(\.name))
            for field in defaultHeaders where !present.contains(field.name) {
                request.headerFields.append(field)
            }
        }
        if !request.headerFields.contains(.contentType), let type = request.body?.defaultContentType {
            request.headerFields.append(HTTPField(name: .contentType, value: type))
        }
        return try await next(request, call)
    }
}
