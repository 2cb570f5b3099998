import Crypto
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import NIOWebSocket

/// One WebSocket connection over SwiftNIO: its channel, the frames it receives and the
/// writer for the frames it sends.
///
/// The channel runs SwiftNIO's own WebSocket codec after Trellis's opening handshake
/// (``WebSocketHandshake``); ping, pong and the closing
/// handshake are answered in the pipeline (``WebSocketControlHandler``), so keep-alive does not
/// depend on the reader, and data frames reach the reader with SwiftNIO's backpressure.
final class WebSocketLink: Sendable {
    private let channel: any Channel
    private let inbound: NIOAsyncChannelInboundStream<WebSocketFrame>
    private let outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>
    private let framesTaken = NIOLockedValueBox(false)
    private let closeFrame: NIOLockedValueBox<WebSocketClosure?>

    private init(
        channel: any Channel,
        inbound: NIOAsyncChannelInboundStream<WebSocketFrame>,
        outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>,
        closeFrame: NIOLockedValueBox<WebSocketClosure?>
    ) {
        self.channel = channel
        self.inbound = inbound
        self.outbound = outbound
        self.closeFrame = closeFrame
    }

    /// The peer's close frame, as the pipeline saw it, whether or not anyone read it.
    var peerClosure: WebSocketClosure? {
        closeFrame.withLockedValue { $0 }
    }

    /// Keeps `asyncChannel`'s scope open until its channel closes, and hands its streams out.
    static func hold(
        _ asyncChannel: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>,
        channel: any Channel,
        closeFrame: NIOLockedValueBox<WebSocketClosure?>
    ) async -> WebSocketLink {
        // The link also passes through a lock: a continuation resumed before its task has
        // suspended hands its value over inside the Swift runtime, where ThreadSanitizer cannot
        // see the ordering, and the link's fields would be reported as a race.
        let handedOver = NIOLockedValueBox<WebSocketLink?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Task {
                try? await asyncChannel.executeThenClose { inbound, outbound in
                    handedOver.withLockedValue {
                        $0 = WebSocketLink(channel: channel, inbound: inbound, outbound: outbound, closeFrame: closeFrame)
                    }
                    continuation.resume()
                    try await channel.closeFuture.get()
                }
            }
        }
        return handedOver.withLockedValue { $0! }
    }

    func frames() -> WebSocketFrames? {
        let first = framesTaken.withLockedValue { taken in
            defer { taken = true }
            return !taken
        }
        guard first else { return nil }
        let channel = channel
        return WebSocketFrames(inbound.makeAsyncIterator()) { code, reason in
            var data = channel.allocator.buffer(capacity: 2)
            data.writeInteger(code.rawValue)
            let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data)
            channel.writeAndFlush(frame).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func send(_ message: WebSocketMessage, host: String) async throws {
        var buffer: ByteBuffer
        let opcode: WebSocketOpcode
        switch message {
        case .text(let text):
            buffer = channel.allocator.buffer(string: text)
            opcode = .text
        case .binary(let data):
            buffer = channel.allocator.buffer(capacity: data.count)
            buffer.writeBytes(data)
            opcode = .binary
        }
        do {
            try await outbound.write(WebSocketFrame(fin: true, opcode: opcode, maskKey: .random(), data: buffer))
        } catch {
            throw TrellisError.connectionFailed(ConnectionFailure(
                host: host,
                reason: "the WebSocket connection is closed; the message was not sent",
                underlying: error
            ))
        }
    }

    /// Sends a close frame and waits for the channel to close (the peer answers with its close
    /// frame, then the pipeline closes the channel), at most `timeout`.
    func close(code: WebSocketCloseCode, reason: String, timeout: Duration) async {
        // A control frame carries at most 125 bytes: the code, and 123 of reason.
        var reason = Substring(reason)
        while reason.utf8.count > 123 { reason.removeLast() }
        var data = channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code.rawValue)
        data.writeString(String(reason))
        try? await outbound.write(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data))
        let channel = channel
        let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) { channel.close(promise: nil) }
        try? await channel.closeFuture.get()
        deadline.cancel()
    }

    func abort() {
        channel.close(promise: nil)
    }
}
