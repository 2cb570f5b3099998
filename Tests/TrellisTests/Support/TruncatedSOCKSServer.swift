import NIOCore

/// A SOCKS5 "proxy" whose reply to `CONNECT` is cut short: it accepts the greeting (no
/// authentication), then answers the request with the first 10 bytes of a reply that
/// announces a domain of 255 bytes, and closes the connection.
final class TruncatedSOCKSServer: RawTestServer {
    private let channel: any Channel

    var port: Int { channel.localAddress!.port! }

    init() async throws {
        channel = try await RawListener.bind { Handler() }
    }

    func stop() async throws {
        try await channel.close()
    }

    /// Only ever used on its channel's event loop.
    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private var received: [UInt8] = []
        private var greeted = false

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            received += buffer.readBytes(length: buffer.readableBytes) ?? []
            if !greeted, received.count >= 3 {
                // Version 5, no authentication.
                greeted = true
                received.removeFirst(3)
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [0x05, 0x00])), promise: nil)
            }
            // The request: version, CONNECT, reserved, then the address and port.
            if greeted, received.count >= 10 {
                let cut: [UInt8] = [0x05, 0x00, 0x00, 0x03, 0xFF, 0x61, 0x62, 0x63, 0x64, 0x65]
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: cut)), promise: nil)
                context.close(promise: nil)
                received.removeAll()
            }
        }
    }
}
