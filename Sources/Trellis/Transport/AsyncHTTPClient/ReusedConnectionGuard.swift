import NIOCore
import NIOHTTP1

/// Tells a request that failed on bytes a previous answer left behind from one whose own answer
/// is broken, on the HTTP/1 connections of the clients the transport makes.
///
/// A server that sends more than its `Content-Length` (36 bytes under `Content-Length: 10`)
/// leaves the rest in the parser's buffer once the answer has ended. SwiftNIO's parser reads
/// no further until the next request goes out on the connection, so the connection returns to
/// the pool, and the next request's answer starts with those bytes and fails to parse
/// ("invalid constant string"): under concurrency, about a third of the requests that met such
/// a connection failed here. Browsers and OkHttp drop the connection and send the request
/// again, as for a stale one.
///
/// The guard sits after the parser and notes whether the connection has ended an answer. A parse
/// error before the head of a later answer is then reported as ``LeftoverBytes``, and the
/// connection is closed; the retry stage sends an idempotent request that failed so again, on
/// another connection, up to three times. A parse error on a connection's first answer is the
/// server's own, and stays a protocol violation that is never retried.
///
/// What it cannot do is keep the connection from being used once more: AsyncHTTPClient hands
/// it to a waiting request as soon as the answer ends, before the parser reaches the excess,
/// and nothing outside AsyncHTTPClient can tell it not to. A request that may not be sent
/// again (a `POST`) fails there, with this reason.
enum ReusedConnectionGuard {
    /// Puts a guard right after the response parser of a new HTTP/1 connection, as
    /// ``ResponseStatusGuard/installOnConnection(_:)`` does.
    static func install(on channel: any Channel) -> EventLoopFuture<Void> {
        channel.onItsLoop {
            let pipeline = channel.pipeline.syncOperations
            guard let parser = try? pipeline.handler(type: ByteToMessageHandler<HTTPResponseDecoder>.self) else { return }
            try pipeline.addHandler(Handler(), position: .after(parser))
        }
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias InboundOut = HTTPClientResponsePart

        /// Whether an answer has ended on this connection.
        private var hasEndedAnAnswer = false
        /// Whether the head of the answer under way has come.
        private var headCame = false

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch Self.unwrapInboundIn(data) {
            case .head(let head) where head.status.code >= 200:
                headCame = true
            case .end:
                if headCame { hasEndedAnAnswer = true }
                headCame = false
            default:
                break
            }
            context.fireChannelRead(data)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            guard let parserError = error as? HTTPParserError, parserError != .invalidEOFState, hasEndedAnAnswer, !headCame else {
                context.fireErrorCaught(error)
                return
            }
            context.fireErrorCaught(LeftoverBytes(cause: parserError))
            context.close(promise: nil)
        }
    }
}

/// The error ``ReusedConnectionGuard`` fails a request with: the bytes at the start of its
/// answer, on a connection that had carried an answer before, were not HTTP.
struct LeftoverBytes: Error {
    let cause: HTTPParserError
}
