import HTTPTypes

/// Asks for compressed responses and decodes them, and compresses a request body that asks for
/// it, on each hop: the behaviour is Trellis's on every transport.
///
/// A request that sets its own `Accept-Encoding` (a download, which resumes by byte ranges of
/// what the server sends, or a caller who wants the bytes as sent) gets the body untouched.
struct CompressionStage: Stage {
    let settings: Client.Configuration.Compression
    /// Whether the transport decodes bodies itself (URLSession always does).
    let transportDecodes: Bool

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        settings.decodesResponses || transportDecodes || request.compressesBody
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
        if asksForEncoding { request.headerFields[.acceptEncoding] = ContentDecoder.acceptedEncodings }
        return try decoded(try await next(request, call), for: request, askedForEncoding: asksForEncoding)
    }

    /// `response` with its body decoded, when it is encoded and either this stage asked for an
    /// encoding or the transport decodes.
    private func decoded(_ response: Response<ResponseBody>, for request: Request, askedForEncoding: Bool) throws -> Response<ResponseBody> {
        guard askedForEncoding || transportDecodes,
            let encoding = response.headerFields[.contentEncoding],
            encoding.trimmingCharacters(in: .whitespaces).lowercased() != "identity",
            request.method != .head,
            response.status.code != 204, response.status.code != 304
        else { return response }
        // The body the caller reads is decoded: its headers say so.
        var head = response.head
        let announced = head.headerFields[.contentLength].flatMap { Int64($0) }
        head.headerFields[.contentEncoding] = nil
        head.headerFields[.contentLength] = nil
        if transportDecodes {
            // The transport decoded whatever coding it knows (libcurl: `gzip, gzip`, `br`,
            // `zstd`), not only the ones Trellis asks for: the ratio guard holds for all of them.
            if request.headerFields[.acceptEncoding]?.lowercased() == "identity" {
                throw Self.decodedAgainstIdentity(encoding, host: request.head.authority ?? "")
            }
            return Response(head: head, body: ContentDecoder.guarded(response.body, announcedLength: announced, limits: settings))
        }
        guard let algorithm = ContentDecoder.algorithm(for: encoding) else { return response }
        let host = request.head.authority ?? ""
        return Response(head: head, body: ContentDecoder.decoded(response.body, algorithm: algorithm, limits: settings, host: host))
    }

    /// A request for the bytes as sent (a download, which resumes by offsets into them)
    /// answered with a coding the transport decodes on the fly: what it would hand over is not
    /// what the server sent, so a resumed range would splice the server's offsets into decoded
    /// data. Refused, never retried (the server would answer the same way).
    private static func decodedAgainstIdentity(_ encoding: String, host: String) -> TrellisError {
        var failure = ConnectionFailure(
            host: host,
            reason: "the server answered a request for the body as sent (Accept-Encoding: identity) with Content-Encoding \(encoding), "
                + "which this transport decodes on the fly, so the bytes would not be the server's; AsyncHTTPClientTransport keeps them"
        )
        failure.isProtocolViolation = true
        return TrellisError.connectionFailed(failure)
    }
}
