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

/// Answers pings, sends pings on a timer and closes the channel when one goes unanswered, and
/// completes the closing handshake, whether or not anyone is reading.
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
        let frame = unwrapInboundIn(data)
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
