import HTTPTypes

/// For a transport that decodes bodies itself (URLSession always does), makes each hop's
/// response say what its body is, right after the transport: the bytes are decoded, so the head
/// loses the `Content-Encoding` and `Content-Length` that came with the encoded ones. Above it,
/// the cache and coalescing share only heads that tell the truth, whichever transport wrote them
/// and whichever reads them: a cache that one client on each transport shares would otherwise
/// keep decoded bytes under `Content-Encoding: gzip`, which the other client decodes again and
/// fails on, or serves as they are.
///
/// The decoded body is held to the compression ratio limit against the length the server
/// announced. A request for the bytes as sent (`Accept-Encoding: identity`, a download) that
/// the server answers encoded anyway is refused: these bytes are not the server's.
struct TransportDecodingStage: Stage {
    let settings: Client.Configuration.Compression

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let response = try await next(request, call)
        guard let encoding = response.headerFields[.contentEncoding],
            encoding.trimmingCharacters(in: .whitespaces).lowercased() != "identity",
            request.method != .head,
            response.status.code != 204, response.status.code != 304
        else { return response }
        if request.headerFields[.acceptEncoding]?.lowercased() == "identity" {
            throw Self.decodedAgainstIdentity(encoding, host: request.head.authority ?? "")
        }
        var head = response.head
        let announced = head.headerFields[.contentLength].flatMap { Int64($0) }
        head.headerFields[.contentEncoding] = nil
        head.headerFields[.contentLength] = nil
        // The transport decoded whatever coding it knows (libcurl: `gzip, gzip`, `br`, `zstd`),
        // not only the ones Trellis asks for: the ratio guard holds for all of them. A body in
        // memory stays in memory, so that the cache above can keep it.
        if let bytes = response.body.bytes, let announced {
            var guardrail = ContentDecoder.RatioGuard(limits: settings)
            guardrail.encoded = Int(clamping: announced)
            try guardrail.count(bytes.readableBytes)
            return Response(head: head, body: response.body)
        }
        return Response(head: head, body: ContentDecoder.guarded(response.body, announcedLength: announced, limits: settings))
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
