import NIOCore
import NIOHTTP2

/// Closes an HTTP/2 connection whose frames could not be parsed, and remembers why.
///
/// A header block that cannot be decoded (one past SwiftNIO's 16 KB limit, an HPACK bomb, or
/// bytes that are not HPACK at all) leaves the connection's header compression out of step
/// with the server's, so nothing more on it can be read: RFC 9113 (sections 4.3 and 5.4.1)
/// has the client send GOAWAY and close the connection. SwiftNIO sends the GOAWAY but keeps the
/// connection open for its streams, and AsyncHTTPClient 1.37 leaves them waiting, so each call
/// on it waited out its whole deadline. This handler, last in each HTTP/2 connection's pipeline
/// of the clients the transport makes, closes the connection instead; each stream's guard
/// (see `ResponseStatusGuard`) then fails its request with ``BrokenHTTP2Connection``.
final class HTTP2ConnectionBreak: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    /// What broke the connection, once something has; read by its streams, on its event loop.
    private(set) var cause: NIOHTTP2Errors.UnableToParseFrame?

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let unparsable = error as? NIOHTTP2Errors.UnableToParseFrame, cause == nil {
            cause = unparsable
            context.close(promise: nil)
        }
        context.fireErrorCaught(error)
    }

    /// Puts the handler last in a new HTTP/2 connection's pipeline.
    static func install(on channel: any Channel) -> EventLoopFuture<Void> {
        channel.onItsLoop {
            try channel.pipeline.syncOperations.addHandler(HTTP2ConnectionBreak(), position: .last)
        }
    }

    /// What broke the connection `stream` belongs to, if anything did.
    static func cause(of stream: any Channel) -> NIOHTTP2Errors.UnableToParseFrame? {
        guard let connection = stream.parent,
            let handler = try? connection.pipeline.syncOperations.handler(type: HTTP2ConnectionBreak.self)
        else { return nil }
        return handler.cause
    }
}

/// The error a request fails with when the HTTP/2 connection it was on broke (see
/// ``HTTP2ConnectionBreak``).
struct BrokenHTTP2Connection: Error {
    let cause: NIOHTTP2Errors.UnableToParseFrame
}
