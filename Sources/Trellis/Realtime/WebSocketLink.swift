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
        await withCheckedContinuation { continuation in
            Task {
                try? await asyncChannel.executeThenClose { inbound, outbound in
                    continuation.resume(returning: WebSocketLink(channel: channel, inbound: inbound, outbound: outbound, closeFrame: closeFrame))
                    try await channel.closeFuture.get()
                }
            }
        }
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

/// The data frames of one link, reassembled into messages.
final class WebSocketFrames {
    private var iterator: NIOAsyncChannelInboundStream<WebSocketFrame>.AsyncIterator
    /// Sends a close frame with this code, then closes: for a message Trellis refuses.
    private let refuse: @Sendable (WebSocketCloseCode, String) -> Void

    init(
        _ iterator: NIOAsyncChannelInboundStream<WebSocketFrame>.AsyncIterator,
        refuse: @escaping @Sendable (WebSocketCloseCode, String) -> Void
    ) {
        self.iterator = iterator
        self.refuse = refuse
    }

    private func refusal(_ code: WebSocketCloseCode, _ reason: String) -> TrellisError {
        refuse(code, reason)
        return .webSocketClosed(WebSocketClosure(code: code, reason: reason))
    }

    /// The next whole message, or `nil` at a close frame or the end of the connection.
    func nextMessage(maximumSize: Int, host: String) async throws -> WebSocketMessage? {
        var pending: (opcode: WebSocketOpcode, buffer: ByteBuffer)?
        while true {
            let frame: WebSocketFrame?
            do {
                frame = try await iterator.next()
            } catch let error as WebSocketPingTimeout {
                throw TrellisError.connectionFailed(ConnectionFailure(
                    host: host,
                    reason: "no pong within \(error.timeout) of a ping: the WebSocket connection counts as lost",
                    underlying: error
                ))
            } catch {
                if Task.isCancelled { throw CancellationError() }
                throw TrellisError.connectionFailed(ConnectionFailure(
                    host: host,
                    reason: "the WebSocket connection was lost (\(error))",
                    underlying: error
                ))
            }
            guard let frame else { return nil }
            switch frame.opcode {
            case .text, .binary:
                pending = (frame.opcode, frame.unmaskedData)
            case .continuation:
                guard pending != nil else { continue }
                var data = frame.unmaskedData
                pending?.buffer.writeBuffer(&data)
            case .connectionClose:
                // The control handler has recorded it (``WebSocketLink/peerClosure``).
                return nil
            default:
                continue
            }
            guard let message = pending else { continue }
            if message.buffer.readableBytes > maximumSize {
                throw refusal(.messageTooBig, "a message of more than \(maximumSize) bytes (WebSocketOptions.maximumMessageSize)")
            }
            guard frame.fin else { continue }
            if message.opcode == .text {
                guard let text = String(validating: message.buffer.readableBytesView, as: UTF8.self) else {
                    throw refusal(.invalidPayload, "the server sent a text message that is not UTF-8")
                }
                return .text(text)
            }
            return .binary(Data(buffer: message.buffer, byteTransferStrategy: .noCopy))
        }
    }
}

extension WebSocketClosure {
    /// The code and reason of a close frame.
    init(_ frame: WebSocketFrame) {
        var data = frame.unmaskedData
        let code = data.readInteger(as: UInt16.self).map(WebSocketCloseCode.init(rawValue:))
        self.init(code: code, reason: data.readString(length: data.readableBytes) ?? "")
    }
}

extension TrellisError {
    /// A lost connection or a missed pong: what reconnection is for.
    var isConnectionLoss: Bool {
        if case .connectionFailed = self { return true }
        return false
    }
}

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

/// Opens WebSocket connections: TCP, TLS with the client's pins, the HTTP/1.1 upgrade.
enum WebSocketDialer {
    enum Outcome: Sendable {
        case upgraded(WebSocketLink)
        /// The server answered the upgrade request with another status.
        case refused(HTTPResponse)
    }

    private enum UpgradeResult: Sendable {
        case upgraded(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, any Channel, NIOLockedValueBox<WebSocketClosure?>)
        case refused(HTTPResponse)
    }

    /// Connects to `request`'s URL (`http` or `https`, standing for `ws` and `wss`) and sends
    /// the upgrade with the request's header fields.
    static func dial(_ request: Request, options: WebSocketOptions, pins: PinnedHost?) async throws -> Outcome {
        guard let url = request.url, let host = url.host, !host.isEmpty else {
            throw TrellisError.invalidRequest(InvalidRequest(.url, "\(RequestLog.redactedURL(request)) has no host to open a WebSocket to"))
        }
        let secure = url.scheme?.lowercased() == "https"
        let port = url.port ?? (secure ? 443 : 80)
        let authority = request.head.authority ?? host
        let hostName = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let tlsContext: NIOSSLContext?
        if secure {
            var tls = options.tlsConfiguration ?? .makeClientConfiguration()
            if let pins { tls = pins.enforcing(on: tls) }
            do {
                tlsContext = try NIOSSLContext(configuration: tls)
            } catch {
                throw TrellisError.tlsFailed(ConnectionFailure(host: authority, reason: "the TLS configuration is invalid: \(error)", underlying: error))
            }
        } else {
            tlsContext = nil
        }
        var target = url.path(percentEncoded: true)
        if target.isEmpty { target = "/" }
        if let query = url.query(percentEncoded: true) { target += "?" + query }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: authority)
        for field in request.headerFields where field.name.canonicalName != "host" {
            headers.add(name: field.name.rawName, value: field.value)
        }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target, headers: headers)
        let sniName = Self.isIPAddress(hostName) ? nil : hostName
        let timeout = options.connectTimeout
        let control = (options.pingInterval, options.pingTimeout)
        let maximumFrameSize = min(max(options.maximumMessageSize, 1 << 14), Int(UInt32.max))

        let result: UpgradeResult
        do {
            let upgrade = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(TimeAmount(timeout))
                .connect(host: hostName, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let promise = channel.eventLoop.makePromise(of: UpgradeResult.self)
                        let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                            promise.fail(TrellisError.timedOut(TimeoutFailure(timeout: timeout, request: "WebSocket upgrade of \(RequestLog.redactedURL(request))")))
                            channel.close(promise: nil)
                        }
                        promise.futureResult.whenComplete { _ in deadline.cancel() }
                        let openingHandshake: @Sendable () throws -> Void = {
                            try Self.addOpeningHandshake(
                                to: channel,
                                head: head,
                                maximumFrameSize: maximumFrameSize,
                                control: control,
                                promise: promise
                            )
                        }
                        if let tlsContext {
                            let tls = try NIOSSLClientHandler(context: tlsContext, serverHostname: sniName)
                            try channel.pipeline.syncOperations.addHandler(tls)
                            try channel.pipeline.syncOperations.addHandler(
                                HandshakeGate(pins: pins, host: authority, promise: promise, onVerified: openingHandshake)
                            )
                        } else {
                            try openingHandshake()
                        }
                        return promise.futureResult
                    }
                }
            result = try await upgrade.get()
        } catch {
            // The same SwiftNIO and SwiftNIO SSL errors as beneath AsyncHTTPClient.
            throw AsyncHTTPClientTransport.translate(error, host: authority, timeout: request.timeout ?? .seconds(60), request: request, pins: pins)
        }
        switch result {
        case .upgraded(let asyncChannel, let channel, let closeFrame):
            return .upgraded(await WebSocketLink.hold(asyncChannel, channel: channel, closeFrame: closeFrame))
        case .refused(let head):
            return .refused(head)
        }
    }

    private static func addOpeningHandshake(
        to channel: any Channel,
        head: HTTPRequestHead,
        maximumFrameSize: Int,
        control: (Duration?, Duration),
        promise: EventLoopPromise<UpgradeResult>
    ) throws {
        let handshake = WebSocketHandshake(head: head, maximumFrameSize: maximumFrameSize) { channel in
            let closeFrame = NIOLockedValueBox<WebSocketClosure?>(nil)
            try channel.pipeline.syncOperations.addHandler(
                WebSocketControlHandler(pingInterval: control.0, pingTimeout: control.1, closeFrame: closeFrame)
            )
            let asyncChannel = try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(
                wrappingChannelSynchronously: channel,
                configuration: .init(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8))
            )
            promise.succeed(.upgraded(asyncChannel, channel, closeFrame))
        } refused: { response in
            promise.succeed(.refused(response))
        } failed: { error in
            promise.fail(error)
        }
        try channel.pipeline.syncOperations.addHandler(handshake)
    }

    private static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}

/// Holds back the upgrade request until the TLS handshake is done and the server certificate
/// satisfies the pins: the request carries the access token, which must not reach an
/// unverified server.
private final class HandshakeGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let pins: PinnedHost?
    private let host: String
    // Failing an already completed promise does nothing, so every path may call it.
    private let fail: (any Error) -> Void
    private let onVerified: () throws -> Void

    init<Value>(pins: PinnedHost?, host: String, promise: EventLoopPromise<Value>, onVerified: @escaping () throws -> Void) {
        self.pins = pins
        self.host = host
        self.fail = { promise.fail($0) }
        self.onVerified = onVerified
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted = event as? TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        do {
            try pins?.verify(context.pipeline.syncOperations.handler(type: NIOSSLHandler.self).peerCertificate)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            try onVerified()
        } catch {
            fail(error)
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "the server closed the connection during the TLS handshake")))
        context.fireChannelInactive()
    }
}

/// The WebSocket opening handshake (RFC 6455, section 4): sends the upgrade request, reads the
/// response head, checks `Sec-WebSocket-Accept`, and in the same event-loop turn puts the frame
/// codec in its place and hands it the bytes that came after the head.
///
/// SwiftNIO's typed client upgrade handler swaps the pipeline over several turns, and the end
/// of a connection overtakes the bytes it holds meanwhile: a server that sends a message and
/// closes straight after the 101 would have that message lost. Doing the swap in one turn
/// leaves no such gap.
private final class WebSocketHandshake: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private static let maximumHeadSize = 64 * 1024
    private let head: HTTPRequestHead
    private let key: String
    private let maximumFrameSize: Int
    private let upgraded: (any Channel) throws -> Void
    private let refused: (HTTPResponse) -> Void
    private let failed: (any Error) -> Void
    private var received: ByteBuffer?
    private var requestSent = false
    private var done = false

    init(
        head: HTTPRequestHead,
        maximumFrameSize: Int,
        upgraded: @escaping (any Channel) throws -> Void,
        refused: @escaping (HTTPResponse) -> Void,
        failed: @escaping (any Error) -> Void
    ) {
        self.head = head
        self.key = NIOWebSocketClientUpgrader.randomRequestKey()
        self.maximumFrameSize = maximumFrameSize
        self.upgraded = upgraded
        self.refused = refused
        self.failed = failed
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { sendRequest(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendRequest(context: context)
        context.fireChannelActive()
    }

    private func sendRequest(context: ChannelHandlerContext) {
        guard !requestSent else { return }
        requestSent = true
        var text = "GET \(head.uri) HTTP/1.1\r\n"
        for (name, value) in head.headers {
            text += "\(name): \(value)\r\n"
        }
        text += "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: text)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        var bytes = unwrapInboundIn(data)
        if received == nil {
            received = bytes
        } else {
            received!.writeBuffer(&bytes)
        }
        guard var buffer = received else { return }
        let view = buffer.readableBytesView
        guard let end = view.firstRange(of: [13, 10, 13, 10]) else {
            if buffer.readableBytes > Self.maximumHeadSize {
                finish(context: context, failure: "the upgrade response head is larger than 64 KiB")
            }
            return
        }
        let headLength = end.upperBound - view.startIndex
        let headText = buffer.readString(length: headLength) ?? ""
        guard let response = Self.parse(headText) else {
            finish(context: context, failure: "the server's answer to the upgrade is not an HTTP response")
            return
        }
        guard response.status == .switchingProtocols else {
            done = true
            refused(response)
            context.close(promise: nil)
            return
        }
        let expected = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
        guard response.headerFields[.upgrade]?.lowercased() == "websocket",
            response.headerFields[values: .connection].contains(where: { $0.lowercased().contains("upgrade") }),
            response.headerFields[.secWebSocketAccept] == expected
        else {
            finish(context: context, failure: "the server's 101 response does not accept the WebSocket upgrade (Upgrade, Connection or Sec-WebSocket-Accept is wrong)")
            return
        }
        done = true
        do {
            let pipeline = context.pipeline.syncOperations
            try pipeline.addHandler(WebSocketFrameEncoder())
            try pipeline.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maximumFrameSize)))
            try pipeline.addHandler(WebSocketProtocolErrorHandler())
            try upgraded(context.channel)
            if buffer.readableBytes > 0 {
                context.fireChannelRead(wrapInboundOut(buffer))
            }
            pipeline.removeHandler(context: context, promise: nil)
        } catch {
            failed(error)
            context.close(promise: nil)
        }
    }

    private func finish(context: ChannelHandlerContext, failure reason: String) {
        done = true
        failed(TrellisError.connectionFailed(ConnectionFailure(host: head.headers.first(name: "Host") ?? "", reason: reason)))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done {
            done = true
            failed(TrellisError.connectionFailed(ConnectionFailure(
                host: head.headers.first(name: "Host") ?? "",
                reason: "the server closed the connection before answering the WebSocket upgrade"
            )))
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !done {
            done = true
            failed(error)
        }
        context.close(promise: nil)
    }

    /// The status line and header fields of a response head.
    static func parse(_ text: String) -> HTTPResponse? {
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: true)[...]
        guard let statusLine = lines.popFirst() else { return nil }
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let code = Int(parts[1]), (100...599).contains(code) else { return nil }
        var fields = HTTPFields()
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon])) else { continue }
            fields.append(HTTPField(name: name, value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return HTTPResponse(status: .init(code: code, reasonPhrase: parts.count > 2 ? String(parts[2]) : ""), headerFields: fields)
    }
}
