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

/// The WebSocket opening handshake (RFC 6455, section 4): sends the upgrade request, reads the
/// response head, checks `Sec-WebSocket-Accept`, and in the same event-loop turn puts the frame
/// codec in its place and hands it the bytes that came after the head.
///
/// SwiftNIO's typed client upgrade handler swaps the pipeline over several turns, and the end
/// of a connection overtakes the bytes it holds meanwhile: a server that sends a message and
/// closes straight after the 101 would have that message lost. Doing the swap in one turn
/// leaves no such gap.
final class WebSocketHandshake: ChannelInboundHandler, RemovableChannelHandler {
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
        if let unoffered = Self.unoffered(in: response, offered: head.headers) {
            finish(context: context, failure: "the server's 101 response \(unoffered), which the request did not offer")
            return
        }
        done = true
        do {
            let pipeline = context.pipeline.syncOperations
            try pipeline.addHandler(WebSocketFrameEncoder())
            try pipeline.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maximumFrameSize)))
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

    /// What the 101 response turns on that the request did not offer, in words, if anything:
    /// a subprotocol or an extension (RFC 6455 section 4.1 asks the client to fail then, since
    /// the frames that follow would mean something it did not agree to).
    static func unoffered(in response: HTTPResponse, offered: HTTPHeaders) -> String? {
        // Subprotocols are compared as written, extensions by name without their parameters.
        // The request's fields come split at commas already; the response's come whole.
        func items(_ values: [String], name: (Substring) -> String) -> [String] {
            values.flatMap { $0.split(separator: ",") }.map(name).filter { !$0.isEmpty }
        }
        let protocolName = { (item: Substring) in item.trimmingCharacters(in: .whitespaces) }
        let extensionName = { (item: Substring) in
            (item.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? "").lowercased()
        }
        let offeredProtocols = Set(offered[canonicalForm: "Sec-WebSocket-Protocol"].map(protocolName))
        for chosen in items(response.headerFields[values: .secWebSocketProtocol], name: protocolName) where !offeredProtocols.contains(chosen) {
            return "chose the subprotocol \(chosen)"
        }
        let offeredExtensions = Set(offered[canonicalForm: "Sec-WebSocket-Extensions"].map(extensionName))
        for chosen in items(response.headerFields[values: .secWebSocketExtensions], name: extensionName) where !offeredExtensions.contains(chosen) {
            return "turned on the extension \(chosen)"
        }
        return nil
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
