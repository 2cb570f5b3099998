import Crypto
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// An in-process Hummingbird server whose WebSocket routes `configure` declares; a request
/// that is not upgraded gets the router's answer (404 for an unknown path, the error a
/// `shouldUpgrade` throws).
enum WebSocketTestServer {
    typealias Handler = WebSocketDataHandler<WebSocketRouterContext<BasicWebSocketRequestContext>>

    /// Runs `body` with the `ws://127.0.0.1:<port>` (or, with `tls`, `wss://localhost:<port>`)
    /// URL of the server.
    static func with<Result: Sendable>(
        tls: TLSConfiguration? = nil,
        _ configure: (Router<BasicWebSocketRequestContext>) -> Void,
        _ body: (URL) async throws -> Result
    ) async throws -> Result {
        let router = Router(context: BasicWebSocketRequestContext.self)
        configure(router)
        let webSocket = HTTPServerBuilder.http1WebSocketUpgrade(
            webSocketRouter: router,
            configuration: .init(ws: WebSocketServerConfiguration(maxFrameSize: 4 * 1024 * 1024))
        )
        return try await TestServer.run({ onServerRunning, logger in
            Application(
                router: router,
                server: try tls.map { try .tls(webSocket, tlsConfiguration: $0) } ?? webSocket,
                configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: onServerRunning,
                logger: logger
            )
        }) { port in
            try await body(URL(string: tls == nil ? "ws://127.0.0.1:\(port)" : "wss://localhost:\(port)")!)
        }
    }

    /// Sends every message back as it came.
    static let echo: Handler = { inbound, outbound, _ in
        for try await message in inbound.messages(maxSize: 4 * 1024 * 1024) {
            switch message {
            case .text(let text): try await outbound.write(.text(text))
            case .binary(let bytes): try await outbound.write(.binary(bytes))
            }
        }
    }
}

/// A WebSocket server written on raw SwiftNIO for the faults Hummingbird would not commit: it
/// completes the upgrade, then, per connection, follows a script.
final class RawWebSocketServer: Sendable {
    enum Script: Sendable {
        /// Reads and ignores everything, pings included.
        case silent
        /// Sends a text message with the 101 response, then closes the TCP connection without
        /// a close frame.
        case sendThenDrop(String)
        /// Answers 401 unless the request carries this `Authorization`; with it, upgrades and
        /// sends the header back, then closes with 1000.
        case requireAuthorization(String)
        /// Sends a text message, then a close frame with code 1000.
        case sendThenClose(String)
        /// Sends a text frame with these bytes (not necessarily UTF-8), then reads and
        /// reports the frames the client sends back.
        case sendText([UInt8])
    }

    private let channel: any Channel
    private let connections = NIOLockedValueBox(0)
    /// The codes of the close frames clients sent, in order.
    let closeCodes: AsyncStream<UInt16>
    private let closeCodeSink: AsyncStream<UInt16>.Continuation

    var url: URL { URL(string: "ws://127.0.0.1:\(channel.localAddress!.port!)/raw")! }
    var connectionCount: Int { connections.withLockedValue { $0 } }

    /// `scripts[n]` runs on the n-th connection (the last one on any after it).
    init(scripts: [Script]) async throws {
        let connections = connections
        (closeCodes, closeCodeSink) = AsyncStream.makeStream(of: UInt16.self)
        let closeCodeSink = closeCodeSink
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                let index = connections.withLockedValue { count in
                    defer { count += 1 }
                    return count
                }
                let script = scripts[min(index, scripts.count - 1)]
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScriptHandler(script: script, closeCodes: closeCodeSink))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func stop() async throws {
        closeCodeSink.finish()
        try await channel.close()
    }

    private final class ScriptHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let script: Script
        let closeCodes: AsyncStream<UInt16>.Continuation
        var request = ""
        var upgraded = false

        init(script: Script, closeCodes: AsyncStream<UInt16>.Continuation) {
            self.script = script
            self.closeCodes = closeCodes
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !upgraded else {
                // The first client frame after the upgrade: opcode and, for a close, its code.
                var frame = unwrapInboundIn(data)
                if let first = frame.readInteger(as: UInt8.self), let second = frame.readInteger(as: UInt8.self),
                    first & 0x0F == 0x8, second & 0x7F >= 2, let mask = frame.readBytes(length: 4), let high = frame.readInteger(as: UInt8.self),
                    let low = frame.readInteger(as: UInt8.self)
                {
                    closeCodes.yield(UInt16(high ^ mask[0]) << 8 | UInt16(low ^ mask[1]))
                }
                return
            }
            var buffer = unwrapInboundIn(data)
            request += buffer.readString(length: buffer.readableBytes) ?? ""
            guard request.contains("\r\n\r\n") else { return }
            upgraded = true
            let key = header("sec-websocket-key")
            if case .requireAuthorization(let expected) = script, header("authorization") != expected {
                let refusal = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: refusal)))
                    .whenComplete { _ in bound.value.close(promise: nil) }
                return
            }
            let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
            let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n"
            context.write(wrapOutboundOut(context.channel.allocator.buffer(string: response)), promise: nil)
            switch script {
            case .silent:
                context.flush()
            case .sendThenDrop(let text):
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(wrapOutboundOut(Self.frame(opcode: 0x1, payload: Array(text.utf8), allocator: context.channel.allocator)))
                    .whenComplete { _ in bound.value.close(promise: nil) }
            case .requireAuthorization:
                let text = header("authorization")
                context.write(wrapOutboundOut(Self.frame(opcode: 0x1, payload: Array(text.utf8), allocator: context.channel.allocator)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(Self.frame(opcode: 0x8, payload: [0x03, 0xE8], allocator: context.channel.allocator)), promise: nil)
            case .sendText(let bytes):
                context.writeAndFlush(wrapOutboundOut(Self.frame(opcode: 0x1, payload: bytes, allocator: context.channel.allocator)), promise: nil)
            case .sendThenClose(let text):
                context.write(wrapOutboundOut(Self.frame(opcode: 0x1, payload: Array(text.utf8), allocator: context.channel.allocator)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(Self.frame(opcode: 0x8, payload: [0x03, 0xE8], allocator: context.channel.allocator)), promise: nil)
            }
        }

        private func header(_ name: String) -> String {
            request.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix(name + ":") }
                .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) } ?? ""
        }

        /// An unmasked server frame with a payload under 126 bytes.
        static func frame(opcode: UInt8, payload: [UInt8], allocator: ByteBufferAllocator) -> ByteBuffer {
            var buffer = allocator.buffer(capacity: payload.count + 2)
            buffer.writeInteger(0x80 | opcode)
            buffer.writeInteger(UInt8(payload.count))
            buffer.writeBytes(payload)
            return buffer
        }
    }
}
