import HTTPTypes

/// Fills in what the caller left out, on every hop (a redirect may drop the body): the
/// client's ``Client/Configuration/defaultHeaders``, and `Content-Type` from the body (JSON, a
/// form, a multipart boundary). A field the request has keeps the request's value.
struct DefaultHeadersStage: OptionalStage, InlineStage {
    let defaultHeaders: HTTPFields

    func isNeeded(for request: Request) -> Bool {
        !defaultHeaders.isEmpty || (request.body?.defaultContentType != nil && request.headerFields[.contentType] == nil)
    }

    func prepare(_ request: inout Request) {
        var fields = request.headerFields
        if !defaultHeaders.isEmpty {
            let present = Set(fields.map(\.name))
            for field in defaultHeaders where !present.contains(field.name) {
                fields.append(field)
            }
        }
        if fields[.contentType] == nil, let type = request.body?.defaultContentType {
            fields[.contentType] = type
        }
        request.headerFields = fields
    }
}
