#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import NIOCore
import NIOHTTP1

/// Keeps a proxy that relays with Nagle's algorithm on from holding bytes back for a delayed
/// acknowledgement, on the connections of a route through a proxy (HTTP or SOCKS5).
///
/// Such a proxy (tinyproxy) reads what arrives and writes it on at once, so each piece it
/// reads becomes a write; with Nagle's algorithm, a write less than a segment waits while an
/// earlier one is unacknowledged, and the other end delays its acknowledgement up to 40 ms
/// when the connection looks interactive, as one carrying a request for each answer does. Packet
/// captures on loopback (`Benchmarks/README.md`, "Through a proxy") showed both ways:
///
/// - **Answers.** tinyproxy reads 2 KiB at a time: a 23 KB answer left it as 2,048 bytes, then
///   the rest only once the client's delayed acknowledgement came, 40 ms later, every call, raw
///   AsyncHTTPClient's as well. On Linux the connection sets `TCP_QUICKACK`, which sends the
///   pending acknowledgement at once, after each batch of reads that leaves an answer
///   unfinished (on HTTP/2, after every batch).
/// - **Requests.** AsyncHTTPClient flushes a request's head, then its body: two segments.
///   When the proxy read them apart, the body waited for the server's delayed acknowledgement
///   of the head (a POST's p99 was 45 ms). The head's flush is held until the body's first
///   write, or until the event loop's current work is done, whichever comes first: a body in
///   memory follows in the same turn of the loop, and a stream that is slow to start sends
///   its head as before.
enum ProxyRelayTiming {
    /// Installs both on a new HTTP/1 connection; an HTTP/2 connection gets the
    /// acknowledgements alone, after every batch of reads (its streams share the connection,
    /// so no one answer tells whether more is due).
    static func install(on channel: any Channel) -> EventLoopFuture<Void> {
        channel.onItsLoop {
            let pipeline = channel.pipeline.syncOperations
            #if os(Linux)
            if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPResponseDecoder>.self) {
                try pipeline.addHandler(AcknowledgementsWithinAnAnswer(), position: .after(decoder))
            } else {
                try pipeline.addHandler(AcknowledgementsAfterEveryRead(), position: .first)
            }
            #endif
            if let encoder = try? pipeline.handler(type: HTTPRequestEncoder.self) {
                try pipeline.addHandler(HeadWithBody(), position: .after(encoder))
            }
        }
    }

    #if os(Linux)
    /// Sends the pending acknowledgement of what `context`'s channel has read at once. The
    /// kernel forgets the setting, so it is set each time; a failure leaves the kernel's own
    /// timing, as without the handlers.
    private static func acknowledgeNow(_ context: ChannelHandlerContext) {
        let option = ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_QUICKACK)))
        try? context.channel.syncOptions?.setOption(option, value: 1)
    }

    /// HTTP/1, after the response decoder: acknowledges at once after a batch of reads that
    /// left an answer unfinished, since a delayed acknowledgement holds back only the rest of
    /// an answer.
    ///
    /// Acknowledging after every batch, as on HTTP/2, costs small answers from 32 tasks at once
    /// (an acknowledgement of its own for each answer, where the next request would carry it):
    /// in 5 alternated runs of 3 rounds, GETs were at 0.88x of raw through tinyproxy and squid
    /// after every batch, and at 0.98x and 0.96x with this handler; a later comparison saw less
    /// (0.90x against 0.93x, and no change through squid: `Benchmarks/README.md`).
    final class AcknowledgementsWithinAnAnswer: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart

        /// Whether the answer being read has its head and not yet its end.
        private var answerUnfinished = false
        private let acknowledge: (ChannelHandlerContext) -> Void

        /// `acknowledge` is for tests, which count what the socket option would send.
        init(acknowledge: @escaping (ChannelHandlerContext) -> Void = ProxyRelayTiming.acknowledgeNow) {
            self.acknowledge = acknowledge
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch Self.unwrapInboundIn(data) {
            case .head: answerUnfinished = true
            case .body: break
            case .end: answerUnfinished = false
            }
            context.fireChannelRead(data)
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            if answerUnfinished { acknowledge(context) }
            context.fireChannelReadComplete()
        }
    }

    /// HTTP/2, before everything: acknowledges at once after every batch of reads.
    private final class AcknowledgementsAfterEveryRead: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        func channelReadComplete(context: ChannelHandlerContext) {
            ProxyRelayTiming.acknowledgeNow(context)
            context.fireChannelReadComplete()
        }
    }
    #endif

    /// Between AsyncHTTPClient's handler and the request encoder: holds the flush of a head
    /// that announces a body.
    private final class HeadWithBody: ChannelOutboundHandler {
        typealias OutboundIn = HTTPClientRequestPart
        typealias OutboundOut = HTTPClientRequestPart

        /// Whether a head is written and its flush held.
        private var holding = false

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            switch Self.unwrapOutboundIn(data) {
            case .head(let head):
                // `Expect: 100-continue` waits for the server's word before the body.
                holding = Self.announcesBody(head) && !head.headers.contains(name: "expect")
            case .body, .end:
                holding = false
            }
            context.write(data, promise: promise)
        }

        func flush(context: ChannelHandlerContext) {
            guard holding else { return context.flush() }
            // Flushed with the body's first write, or once the loop has done what it is doing.
            context.eventLoop.assumeIsolated().execute {
                guard self.holding else { return }
                self.holding = false
                context.flush()
            }
        }

        private static func announcesBody(_ head: HTTPRequestHead) -> Bool {
            if let length = head.headers.first(name: "content-length") { return length != "0" }
            return head.headers.contains(name: "transfer-encoding")
        }
    }
}
