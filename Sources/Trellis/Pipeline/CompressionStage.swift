import HTTPTypes

/// Asks for compressed responses and decodes them, and compresses a request body that asks for
/// it, on each hop: the behaviour is Trellis's on every transport.
///
/// A request that sets its own `Accept-Encoding` (a download, which resumes by byte ranges of
/// what the server sends, or a caller who wants the bytes as sent) gets the body untouched.
struct CompressionStage: Stage {
    let settings: Client.Configuration.Compression

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        settings.decodesResponses || request.compressesBody
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var request = request
        if request.compressesBody, let body = request.body, !request.headerFields.contains(.contentEncoding) {
            request.body = ContentEncoder.gzipped(body)
            request.headerFields.append(HTTPField(name: .contentEncoding, value: "gzip"))
            request.headerFields[.contentLength] = nil
        }
        // A caller's own `Accept-Encoding` gets the bytes as sent.
        let asksForEncoding = settings.decodesResponses && !request.headerFields.contains(.acceptEncoding)
        guard asksForEncoding else { return try await next(request, call) }
        request.headerFields[.acceptEncoding] = ContentDecoder.acceptedEncodings
        return decoded(try await next(request, call), for: request)
    }

    /// `response` with its body decoded, when it is encoded in a coding Trellis decodes. A
    /// transport that decodes hands over heads without their coding (``TransportDecodingStage``):
    /// what still says `gzip` here was sent so by the server, or stored so by the cache.
    private func decoded(_ response: Response<ResponseBody>, for request: Request) -> Response<ResponseBody> {
        guard let encoding = response.headerFields[.contentEncoding],
            let algorithm = ContentDecoder.algorithm(for: encoding),
            request.method != .head,
            response.status.code != 204, response.status.code != 304
        else { return response }
        // The body the caller reads is decoded: its headers say so.
        var head = response.head
        head.headerFields[.contentEncoding] = nil
        head.headerFields[.contentLength] = nil
        let host = request.head.authority ?? ""
        return Response(head: head, body: ContentDecoder.decoded(response.body, algorithm: algorithm, limits: settings, host: host))
    }
}
