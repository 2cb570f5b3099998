import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// The exchanges that go through AsyncHTTPClient's async API.
extension AsyncHTTPClientTransport {
    /// A call through AsyncHTTPClient's async API: a streamed call, or a buffered one whose
    /// body is streamed or which overlaps other calls. AsyncHTTPClient's deadline bounds the
    /// wait for the head; a buffered call's body is then read by the deadline too.
    func sendThroughAsyncAPI(_ request: Request, within limits: ExchangeLimits, through route: Route) async throws -> Response<ResponseBody> {
        let timeout = limits.timeout
        let deadline = limits.deadline
        var outgoing = HTTPClientRequest(url: request.urlString)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        outgoing.headers.reserveCapacity(request.headerFields.count)
        request.forEachWireField { name, value in outgoing.headers.add(name: name, value: value) }
        if let body = request.body {
            if let bytes = body.bytes {
                outgoing.body = .bytes(bytes)
            } else {
                let length: HTTPClientRequest.Body.Length = body.length.map { .known($0) } ?? .unknown
                outgoing.body = .stream(RequestBodyChunks(body: body), length: length)
            }
        }
        let host = request.head.authority ?? ""
        let (client, pins) = (route.client, route.pins)
        let response: HTTPClientResponse
        do {
            while true {
                let started = ContinuousClock.now
                do {
                    response = try await client.execute(outgoing, deadline: .now() + TimeAmount(deadline - started))
                    break
                } catch {
                    try await Self.waitForAConnection(after: error, inRoundStartedAt: started, until: deadline)
                }
            }
        } catch {
            throw TransportErrors.translate(error, host: host, timeout: timeout, request: request, pins: pins)
        }
        let head = Self.responseHead(status: response.status, headers: response.headers)
        let chunks = response.body
        let body = ResponseBody(expectedLength: response.headers.first(name: "content-length").flatMap { Int64($0) }) {
            var iterator = chunks.makeAsyncIterator()
            return ChunkIterator {
                do {
                    return try await iterator.next()
                } catch {
                    throw TransportErrors.translate(error, host: host, timeout: timeout, request: request)
                }
            }
        }
        guard let bufferLimit = limits.bufferLimit else {
            return limits.watchingIdleTime(Response(head: head, body: body), of: request)
        }
        // A buffered call's body by the deadline too: AsyncHTTPClient's own stops at the head.
        do {
            let bytes = try await Deadline.run(until: limits, describing: request) {
                try await ExchangeLimits.collect(body, upTo: bufferLimit)
            }
            return Response(head: head, body: ResponseBody(bytes))
        } catch TrellisError.connectionFailed(let failure) where request.body != nil {
            throw TrellisError.connectionFailed(Self.answeredDuringUpload(failure, status: response.status))
        }
    }

    /// `failure`, which broke the response to a request with a body, with the status the
    /// server had answered (300 or more) named in it.
    ///
    /// A server may refuse an upload before it has read it, a 413 to a body too large, with
    /// `Connection: close`. AsyncHTTPClient stops sending once such an answer has come, closes
    /// the connection when the answer has ended, and then fails the exchange for the body it
    /// could not write ("I/O on closed channel"), dropping the rest of the answer. The status
    /// is all that is left of the refusal; without it the caller would see a broken connection.
    static func answeredDuringUpload(_ failure: ConnectionFailure, status: HTTPResponseStatus) -> ConnectionFailure {
        guard status.code >= 300 else { return failure }
        var named = ConnectionFailure(
            host: failure.host,
            reason: "the server answered \(status.code) \(status.reasonPhrase) to a request with a body, "
                + "and the connection closed before the rest of the answer arrived (\(failure.reason))",
            underlying: failure.underlying
        )
        // What the failure was still holds: an answer that broke HTTP is not retried.
        named.isProtocolViolation = failure.isProtocolViolation
        return named
    }
}

/// A streamed request body as AsyncHTTPClient reads it.
private struct RequestBodyChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: RequestBody

    func makeAsyncIterator() -> ChunkIterator {
        body.makeChunkIterator()
    }
}
