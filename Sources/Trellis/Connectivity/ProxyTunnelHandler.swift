import Foundation
import NIOCore

/// Opens a `CONNECT` tunnel through an HTTP proxy before anything else on the connection: it
/// sends the `CONNECT` when the connection becomes active, holds back what the handlers after
/// it write until the proxy answers 2xx, then passes everything through and leaves. For the
/// WebSocket dialer, whose connection is its own (AsyncHTTPClient tunnels its own).
///
/// Not swift-nio-extras' `NIOHTTP1ProxyConnectHandler`: it needs an HTTP encoder and decoder
/// around it, which the dialer would have to take out again once the tunnel is open, handing on
/// the bytes a proxy sent right after its `200` (`aTunnelWhoseTwoHundredIsFollowedByGarbage…`);
/// this handler reads the answer's head itself and has nothing to take out but itself.
final class ProxyTunnelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The proxy answered `CONNECT` with something other than 2xx.
    struct Refused: Error {
        let status: Int
    }

    /// The proxy's answer was not an HTTP response head of a sane size.
    struct NotHTTP: Error {}

    private let target: String
    private let credentials: Proxy.Credentials?
    private var received: ByteBuffer?
    private var held: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var established = false

    /// A tunnel to `host:port`, with `credentials` sent as `Proxy-Authorization: Basic`.
    init(host: String, port: Int, credentials: Proxy.Credentials?) {
        self.target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        self.credentials = credentials
    }

    func channelActive(context: ChannelHandlerContext) {
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let credentials {
            request += "Proxy-Authorization: \(credentials.basicAuthorization)\r\n"
        }
        request += "\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
        context.fireChannelActive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard established else {
            held.append((unwrapOutboundIn(data), promise))
            return
        }
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        if established { context.flush() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !established else { return context.fireChannelRead(data) }
        var bytes = unwrapInboundIn(data)
        if received == nil { received = bytes } else { received!.writeBuffer(&bytes) }
        guard let buffer = received, let view = buffer.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else {
            if received!.readableBytes > 16 * 1024 { fail(context: context, NotHTTP()) }
            return
        }
        let headLength = view.upperBound - buffer.readerIndex
        let head = String(decoding: buffer.readableBytesView.prefix(headLength), as: UTF8.self)
        let statusLine = head.prefix { $0 != "\r" }.split(separator: " ")
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            return fail(context: context, NotHTTP())
        }
        guard (200..<300).contains(status) else { return fail(context: context, Refused(status: status)) }
        established = true
        for (bytes, promise) in held { context.write(wrapOutboundOut(bytes), promise: promise) }
        held = []
        context.flush()
        var rest = buffer
        rest.moveReaderIndex(forwardBy: headLength)
        received = nil
        if rest.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(rest)) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    private func fail(context: ChannelHandlerContext, _ error: any Error) {
        for (_, promise) in held { promise?.fail(error) }
        held = []
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }
}
