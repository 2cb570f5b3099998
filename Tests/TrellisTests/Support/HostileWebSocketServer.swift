import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A WebSocket server that accepts the upgrade as it should, then sends frames RFC 6455 does
/// not allow a server to send, chosen by the request's path, and reports the first frame the
/// client sends back. It writes its frames as bytes, which no WebSocket library would let it do.
///
/// - `/masked`: a text frame with the mask bit set.
/// - `/reserved-bit`: a text frame with RSV1 set, though no extension was agreed.
/// - `/unknown-opcode`: a frame of opcode 3, which RFC 6455 leaves undefined.
/// - `/orphan-continuation`: a continuation frame with no message under way.
/// - `/interleaved`: the first fragment of a text message, then a whole new text message.
/// - `/long-ping`: a ping of 126 bytes (a control frame holds at most 125).
/// - `/fragmented-ping`: a ping without its FIN bit.
/// - `/reserved-close-code`: a close frame with 1005, which only reports may use.
/// - `/short-close`: a close frame of one byte.
/// - `/close-reason-not-utf8`: a close frame with 1000 and a reason that is not UTF-8.
/// - `/unasked-extension`, `/unasked-protocol`: a 101 that turns on `permessage-deflate`, or
///   chooses the subprotocol `chat`, whatever the request offered.
/// - `/chat`: a 101 that chooses `chat`, then `ok` and a close with 1000.
/// - `/fine`: the control: `ok`, then `fine` in two fragments with a ping between them, then
///   a close with 1000.
///
/// Each is held open after what it sends.
final class HostileWebSocketServer: RawTestServer {
    /// The first frame a connection got from the client after the upgrade.
    struct ClientFrame: Sendable {
        let opcode: UInt8
        let masked: Bool
        /// The payload, unmasked.
        let payload: [UInt8]

        /// The close code, for a close frame that carries one.
        var closeCode: UInt16? {
            payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil
        }
    }

    /// The routes of frames against the protocol, each with the close code it should get.
    static let routes: [(String, UInt16)] = [
        "/masked", "/reserved-bit", "/unknown-opcode", "/orphan-continuation", "/interleaved", "/long-ping", "/fragmented-ping",
        "/reserved-close-code", "/short-close",
    ].map { ($0, 1002) } + [("/close-reason-not-utf8", 1007)]

    private let channel: any Channel
    /// Yields the first frame of each connection's client, in the order they come.
    let replies: AsyncStream<ClientFrame>

    var url: URL { URL(string: "ws://127.0.0.1:\(channel.localAddress!.port!)")! }

    init() async throws {
        let (replies, sink) = AsyncStream.makeStream(of: ClientFrame.self)
        self.replies = replies
        channel = try await RawListener.bind { Handler(replies: sink) }
    }

    func stop() async throws {
        try await channel.close()
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let replies: AsyncStream<ClientFrame>.Continuation
        private var received = ByteBuffer()
        private var upgraded = false
        private var replied = false

        init(replies: AsyncStream<ClientFrame>.Continuation) {
            self.replies = replies
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = Self.unwrapInboundIn(data)
            received.writeBuffer(&bytes)
            if !upgraded {
                let text = String(buffer: received)
                guard let end = text.range(of: "\r\n\r\n") else { return }
                upgraded = true
                received.moveReaderIndex(forwardBy: text[..<end.upperBound].utf8.count)
                answer(String(text[..<end.lowerBound]), context: context)
            }
            if !replied, let frame = Self.frame(in: received) {
                replied = true
                replies.yield(frame)
            }
        }

        private func answer(_ head: String, context: ChannelHandlerContext) {
            let lines = head.components(separatedBy: "\r\n")
            let path = lines.first?.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
            let key = lines.first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
            let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
            let agreed = switch path {
            case "/unasked-extension": "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
            case "/unasked-protocol", "/chat": "Sec-WebSocket-Protocol: chat\r\n"
            default: ""
            }
            write(context, Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\(agreed)\r\n".utf8))
            let hi = Array("hi".utf8)
            switch path {
            case "/masked":
                let mask: [UInt8] = [1, 2, 3, 4]
                write(context, [0x81, 0x80 | 2, mask[0], mask[1], mask[2], mask[3], hi[0] ^ mask[0], hi[1] ^ mask[1]])
            case "/reserved-bit":
                write(context, [0xC1, 2] + hi)
            case "/unknown-opcode":
                write(context, [0x83, 2] + hi)
            case "/orphan-continuation":
                write(context, [0x80, 2] + hi)
            case "/interleaved":
                write(context, [0x01, 3] + Array("Hel".utf8) + [0x81, 2] + Array("lo".utf8))
            case "/long-ping":
                write(context, [0x89, 126, 0, 126] + [UInt8](repeating: 0x70, count: 126))
            case "/fragmented-ping":
                write(context, [0x09, 0])
            case "/reserved-close-code":
                write(context, [0x88, 2, 0x03, 0xED])
            case "/short-close":
                write(context, [0x88, 1, 0x03])
            case "/close-reason-not-utf8":
                write(context, [0x88, 4, 0x03, 0xE8, 0xC3, 0x28])
            case "/chat":
                write(context, [0x81, 2] + Array("ok".utf8) + [0x88, 2, 0x03, 0xE8])
            case "/fine":
                write(context, [0x81, 2] + Array("ok".utf8) + [0x01, 2] + Array("fi".utf8) + [0x89, 0] + [0x80, 2] + Array("ne".utf8) + [0x88, 2, 0x03, 0xE8])
            default:
                break
            }
        }

        private func write(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
            context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: bytes)), promise: nil)
        }

        /// The first frame in `buffer`, once it is whole (frames of the client's answers are
        /// short: a length of 125 or less).
        private static func frame(in buffer: ByteBuffer) -> ClientFrame? {
            let bytes = Array(buffer.readableBytesView)
            guard bytes.count >= 2 else { return nil }
            let masked = bytes[1] & 0x80 != 0
            let length = Int(bytes[1] & 0x7F)
            let start = masked ? 6 : 2
            guard length < 126, bytes.count >= start + length else { return nil }
            let key = masked ? Array(bytes[2..<6]) : [0, 0, 0, 0]
            let payload = (0..<length).map { bytes[start + $0] ^ key[$0 % 4] }
            return ClientFrame(opcode: bytes[0] & 0x0F, masked: masked, payload: payload)
        }
    }
}
