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

/// A ping that got no pong in time.
struct WebSocketPingTimeout: Error {
    let timeout: Duration
}

/// A frame RFC 6455 does not allow a server to send (or one too large to take): the
/// connection is failed with `code`.
struct WebSocketProtocolViolation: Error {
    var code: WebSocketCloseCode = .protocolError
    let reason: String
}

/// Answers pings, sends pings on a timer and closes the channel when one goes unanswered,
/// completes the closing handshake, and fails the connection on a frame the protocol forbids,
/// whether or not anyone is reading.
final class WebSocketControlHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let pingInterval: Duration?
    private let pingTimeout: Duration
    private var pinger: RepeatedTask?
    private var pongDeadline: Scheduled<Void>?
    private var closeSent = false
    private let closeFrame: NIOLockedValueBox<WebSocketClosure?>
    /// The payload of the latest ping not yet answered.
    private var pendingPong: ByteBuffer?
    private var pongInFlight = false
    /// Whether a message's first frame has come and its last not yet.
    private var messageOpen = false
    /// Whether the connection was failed for a frame against the protocol: what follows is dropped.
    private var failed = false

    init(pingInterval: Duration?, pingTimeout: Duration, closeFrame: NIOLockedValueBox<WebSocketClosure?>) {
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.closeFrame = closeFrame
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard let pingInterval else { return }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        pinger = context.eventLoop.scheduleRepeatedTask(initialDelay: TimeAmount(pingInterval), delay: TimeAmount(pingInterval)) { _ in
            let (handler, context) = loopBound.value
            handler.ping(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimers()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimers()
        context.fireChannelInactive()
    }

    private func stopTimers() {
        pinger?.cancel()
        pinger = nil
        pongDeadline?.cancel()
        pongDeadline = nil
    }

    private func ping(context: ChannelHandlerContext) {
        guard pongDeadline == nil, !closeSent else { return }
        var payload = context.channel.allocator.buffer(capacity: 8)
        payload.writeInteger(UInt64.random(in: .min ... .max))
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, maskKey: .random(), data: payload)), promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let timeout = pingTimeout
        pongDeadline = context.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            let context = loopBound.value
            context.fireErrorCaught(WebSocketPingTimeout(timeout: timeout))
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        let frame = unwrapInboundIn(data)
        if let violation = violation(in: frame) {
            fail(context: context, violation)
            return
        }
        switch frame.opcode {
        case .ping:
            guard !closeSent else { return }
            // Only the latest ping needs its pong (RFC 6455 section 5.5.3): a peer flooding
            // pings while not reading our pongs holds one payload here, not a growing queue.
            pendingPong = frame.unmaskedData
            writePendingPong(context: context)
        case .pong:
            pongDeadline?.cancel()
            pongDeadline = nil
        case .connectionClose:
            closeFrame.withLockedValue { $0 = WebSocketClosure(frame) }
            context.fireChannelRead(data)
            if closeSent {
                context.close(promise: nil)
            } else {
                // Echo the code, as RFC 6455 asks, then close: the server has finished.
                closeSent = true
                var echo = context.channel.allocator.buffer(capacity: 2)
                if let code = frame.unmaskedData.getInteger(at: frame.unmaskedData.readerIndex, as: UInt16.self) {
                    echo.writeInteger(code)
                }
                let reply = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: echo)
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in
                    loopBound.value.close(promise: nil)
                }
            }
        default:
            context.fireChannelRead(data)
        }
    }

    /// What is wrong with `frame` coming from a server, if anything (RFC 6455 section 5): every
    /// frame is checked here, on the event loop, whether or not anyone is reading messages.
    /// SwiftNIO's decoder checks a control frame's length and fragmentation only while the
    /// frame is incomplete: one that arrives in a single read passes it.
    private func violation(in frame: WebSocketFrame) -> WebSocketProtocolViolation? {
        if frame.maskKey != nil {
            return WebSocketProtocolViolation(reason: "the server sent a masked frame, which a server must not")
        }
        // Trellis offers no extension, so none was agreed that could give these bits a meaning.
        if frame.rsv1 || frame.rsv2 || frame.rsv3 {
            return WebSocketProtocolViolation(reason: "the server set a reserved bit of a frame, with no extension agreed")
        }
        switch frame.opcode {
        case .text, .binary:
            if messageOpen {
                return WebSocketProtocolViolation(reason: "the server began a message before ending the one under way")
            }
            messageOpen = !frame.fin
        case .continuation:
            if !messageOpen {
                return WebSocketProtocolViolation(reason: "the server sent a continuation frame with no message under way")
            }
            messageOpen = !frame.fin
        case .ping, .pong, .connectionClose:
            if !frame.fin {
                return WebSocketProtocolViolation(reason: "the server sent a control frame in fragments")
            }
            if frame.length > 125 {
                return WebSocketProtocolViolation(reason: "the server sent a control frame of \(frame.length) bytes, more than the 125 allowed")
            }
            if frame.opcode == .connectionClose {
                return Self.violation(inClose: frame.unmaskedData)
            }
        default:
            return WebSocketProtocolViolation(reason: "the server sent a frame of an opcode RFC 6455 leaves undefined (\(UInt8(webSocketOpcode: frame.opcode)))")
        }
        return nil
    }

    /// What is wrong with a close frame's payload (RFC 6455 section 5.5.1 and 7.4): none, or a
    /// code a peer may send and a reason in UTF-8.
    private static func violation(inClose payload: ByteBuffer) -> WebSocketProtocolViolation? {
        guard payload.readableBytes > 0 else { return nil }
        guard let code = payload.getInteger(at: payload.readerIndex, as: UInt16.self) else {
            return WebSocketProtocolViolation(reason: "the server sent a close frame of one byte, too short for a code")
        }
        // 1004, 1005, 1006 and 1015 are reserved or only for reports, never sent; 3000 to
        // 4999 are for libraries and applications.
        guard (1000...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code) else {
            return WebSocketProtocolViolation(reason: "the server closed with \(code), a code no peer may send")
        }
        guard String(validating: payload.readableBytesView.dropFirst(2), as: UTF8.self) != nil else {
            return WebSocketProtocolViolation(code: .invalidPayload, reason: "the server closed with a reason that is not UTF-8")
        }
        return nil
    }

    /// Fails the connection: the violation to the reader first (a reader that finds the
    /// connection closed takes it for one that ended), then a close frame with its code and
    /// reason when none was sent yet, then the channel closed.
    private func fail(context: ChannelHandlerContext, _ violation: WebSocketProtocolViolation) {
        failed = true
        context.fireErrorCaught(violation)
        guard !closeSent else {
            context.close(promise: nil)
            return
        }
        closeSent = true
        var payload = context.channel.allocator.buffer(capacity: 2 + violation.reason.utf8.count)
        payload.writeInteger(violation.code.rawValue)
        // A control frame holds 125 bytes; the reasons are shorter ASCII sentences.
        if violation.reason.utf8.count <= 123 { payload.writeString(violation.reason) }
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: payload)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(frame)).whenComplete { _ in
            loopBound.value.close(promise: nil)
        }
    }

    /// SwiftNIO's decoder refusing a frame fails the connection like any other violation.
    /// (SwiftNIO's own `WebSocketProtocolErrorHandler` is not used: it can close the channel
    /// before it passes the error on, and the reader then sees a connection that merely ended.)
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? NIOWebSocketError else {
            context.fireErrorCaught(error)
            return
        }
        guard !failed else { return }
        let violation = switch error {
        case .invalidFrameLength:
            WebSocketProtocolViolation(code: .messageTooBig, reason: "the server sent a frame longer than the decoder takes (WebSocketSettings.maximumMessageSize)")
        case .fragmentedControlFrame:
            WebSocketProtocolViolation(reason: "the server sent a control frame in fragments")
        case .multiByteControlFrameLength:
            WebSocketProtocolViolation(reason: "the server sent a control frame of more than the 125 bytes allowed")
        }
        fail(context: context, violation)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writePendingPong(context: context)
        context.fireChannelWritabilityChanged()
    }

    /// Writes the pong owed, if any, once the previous one has been written and the channel
    /// takes more.
    private func writePendingPong(context: ChannelHandlerContext) {
        guard !pongInFlight, !closeSent, context.channel.isWritable, let payload = pendingPong else { return }
        pendingPong = nil
        pongInFlight = true
        let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: payload)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(pong)).whenComplete { _ in
            let (handler, context) = loopBound.value
            handler.pongInFlight = false
            handler.writePendingPong(context: context)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if unwrapOutboundIn(data).opcode == .connectionClose {
            if closeSent {
                promise?.succeed()
                return
            }
            closeSent = true
        }
        context.write(data, promise: promise)
    }
}
