import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// Refuses a response whose status is under 100, or over HTTP/2 not three digits, before
/// AsyncHTTPClient sees it.
///
/// SwiftNIO's HTTP/1 parser accepts any three digits as a status, so `HTTP/1.1 000` gets
/// through it, and its HTTP/2 codec takes any integer for `:status`. AsyncHTTPClient 1.37 then
/// takes such a head for an informational one (1xx), passes over it, and stops the process at
/// a precondition when the body or the end that follows arrives. A negative `:status` stops it
/// sooner, in the HTTP/2 codec itself, which makes a `UInt` of it. Either way one answer from a
/// server, or from anything between it and the client, could end the process.
///
/// So each HTTP/1 connection of the clients the transport makes gets a guard between the
/// parser and AsyncHTTPClient's own handler, and each HTTP/2 stream one in front of the codec.
/// A head refused there fails its request with ``RefusedStatus``, which the transport
/// reports as an answer that is not HTTP (never retried), and closes the connection, or the
/// stream, whose framing can no longer be trusted. A client the caller brought
/// (``AsyncHTTPClientTransport/init(httpClient:)``) has no guards: its connections cannot be
/// reached before they carry a request.
enum ResponseStatusGuard {
    /// Puts a guard right after the response parser of a new HTTP/1 connection.
    ///
    /// Meant for AsyncHTTPClient's HTTP/1 connection initializer, which runs once its own
    /// handlers are in place and before the connection carries a request.
    ///
    /// A pipeline without SwiftNIO's parser (an AsyncHTTPClient release built differently) is
    /// left as it is rather than failing every connection; the tests of the hostile server
    /// would then stop at the trap.
    static func installOnConnection(_ channel: any Channel) -> EventLoopFuture<Void> {
        channel.onItsLoop {
            let pipeline = channel.pipeline.syncOperations
            guard let parser = try? pipeline.handler(type: ByteToMessageHandler<HTTPResponseDecoder>.self) else { return }
            try pipeline.addHandler(ConnectionGuard(), position: .after(parser))
        }
    }

    /// Puts a guard first in a new HTTP/2 stream's pipeline, in front of the codec that turns
    /// its frames into HTTP/1 parts.
    ///
    /// Meant for AsyncHTTPClient's HTTP/2 stream initializer, which runs before the stream
    /// carries its request.
    static func installOnStream(_ channel: any Channel) -> EventLoopFuture<Void> {
        channel.onItsLoop {
            try channel.pipeline.syncOperations.addHandler(StreamGuard(), position: .first)
        }
    }

    /// An HTTP/1 connection's guard: the parser has checked the status line's form, so only
    /// the value is left to check.
    private final class ConnectionGuard: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias InboundOut = HTTPClientResponsePart

        /// Whether a head was refused: whatever else comes on the connection is dropped.
        private var refused = false

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !refused else { return }
            if case .head(let head) = Self.unwrapInboundIn(data), head.status.code < 100 {
                refused = true
                context.fireErrorCaught(RefusedStatus(status: String(head.status.code), version: "HTTP/1.1"))
                context.close(promise: nil)
                return
            }
            context.fireChannelRead(data)
        }
    }

    /// An HTTP/2 stream's guard: `:status` must be three digits (RFC 9113 section 8.3.2) and
    /// 100 or more. A header block without `:status` (trailers) passes; the codec checks the
    /// rest. When the stream ends because its connection broke (``HTTP2ConnectionBreak``), the
    /// guard says so first, so that the request fails with the reason rather than with a
    /// connection closed for no reason given.
    private final class StreamGuard: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame.FramePayload
        typealias InboundOut = HTTP2Frame.FramePayload

        private var refused = false

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !refused else { return }
            if case .headers(let block) = Self.unwrapInboundIn(data), let status = block.headers.first(name: ":status"),
                !Self.isAcceptable(status) {
                refused = true
                context.fireErrorCaught(RefusedStatus(status: status, version: "HTTP/2"))
                context.close(promise: nil)
                return
            }
            context.fireChannelRead(data)
        }

        func channelInactive(context: ChannelHandlerContext) {
            if !refused, let cause = HTTP2ConnectionBreak.cause(of: context.channel) {
                context.fireErrorCaught(BrokenHTTP2Connection(cause: cause))
            }
            context.fireChannelInactive()
        }

        private static func isAcceptable(_ status: String) -> Bool {
            // Read in place: every HTTP/2 response passes here, and a copy into an array would
            // allocate for each.
            let digits = status.utf8
            guard digits.count == 3, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return false }
            return digits.first != UInt8(ascii: "0")
        }
    }
}

/// The error a head refused by ``ResponseStatusGuard`` fails its request with.
struct RefusedStatus: Error {
    /// The status as the server sent it.
    let status: String
    /// `HTTP/1.1` or `HTTP/2`.
    let version: String
}
