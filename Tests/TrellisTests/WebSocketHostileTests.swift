import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import NIOConcurrencyHelpers
import NIOEmbedded
import NIOWebSocket
import Testing
@testable import Trellis

/// Refuses every response: a middleware that decides, after the upgrade, that the
/// conversation must not go on.
private struct RefuseResponses: Middleware {
    struct Refused: Error {}

    func intercept(
        _ request: Trellis.Request,
        next: @Sendable (Trellis.Request) async throws -> Trellis.Response<Trellis.ResponseBody>
    ) async throws -> Trellis.Response<Trellis.ResponseBody> {
        _ = try await next(request)
        throw Refused()
    }
}

@Suite("WebSocket peers that misbehave")
struct WebSocketHostileTests {
    @Test func aPingFloodHoldsOnePongAtATime() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(
            WebSocketControlHandler(pingInterval: nil, pingTimeout: .seconds(10), closeFrame: NIOLockedValueBox(nil))
        )
        // A peer that floods pings and reads nothing: the channel stops taking writes.
        channel.isWritable = false
        for index in 0..<10_000 {
            var payload = channel.allocator.buffer(capacity: 8)
            payload.writeInteger(UInt64(index))
            try channel.writeInbound(WebSocketFrame(fin: true, opcode: .ping, data: payload))
        }
        #expect(try channel.readOutbound(as: WebSocketFrame.self) == nil)

        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        let pong = try #require(try channel.readOutbound(as: WebSocketFrame.self))
        #expect(pong.opcode == .pong)
        // The latest ping's payload, as given to the frame (the encoder masks it on the wire).
        #expect(pong.data.getInteger(at: pong.data.readerIndex, as: UInt64.self) == 9_999)
        #expect(try channel.readOutbound(as: WebSocketFrame.self) == nil)
        _ = try channel.finish()
    }

    @Test func aConnectionWhoseUpgradeAMiddlewareRefusesIsClosed() async throws {
        let (events, sink) = AsyncStream.makeStream(of: String.self)
        let routes: (Router<BasicWebSocketRequestContext>) -> Void = { router in
            router.ws("hold") { inbound, _, _ in
                sink.yield("opened")
                for try await _ in inbound.messages(maxSize: 1024) {}
                sink.yield("closed")
            }
        }
        try await WebSocketTestServer.with(routes) { url in
            let base = URL(string: url.absoluteString.replacingOccurrences(of: "ws://", with: "http://"))!
            let client = Client(baseURL: base, middlewares: [RefuseResponses()])
            await #expect(throws: RefuseResponses.Refused.self) {
                _ = try await client.webSocket(for: Trellis.Request(method: .get, url: url.appending(path: "hold")), settings: .patient)
            }
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == "opened")
            #expect(await iterator.next() == "closed")
        }
    }

    /// A frame a server must not send fails the connection (RFC 6455 section 7.1.7), with 1002,
    /// or 1007 for a close reason that is not UTF-8 (as for text that is not): the reader gets
    /// `webSocketClosed` with that code and the reason, and the server gets a close frame with
    /// it, masked as every frame from a client must be.
    @Test(.hangGuard, arguments: HostileWebSocketServer.routes)
    func aFrameAgainstTheProtocolFailsTheConnection(_ path: String, code: UInt16) async throws {
        try await HostileWebSocketServer.with { server in
            let client = Client(baseURL: URL(string: "http://127.0.0.1")!)
            let connection = try await client.webSocket(for: Trellis.Request(method: .get, url: server.url.appending(path: path)), settings: .patient)
            var received: [Trellis.WebSocketMessage] = []
            let error = await #expect(throws: TrellisError.self, "\(path)") {
                for try await message in connection.messages { received.append(message) }
            }
            #expect(received.isEmpty, "\(path): \(received)")
            guard case .webSocketClosed(let closure) = error else {
                Issue.record("\(path): expected webSocketClosed, got \(String(describing: error))")
                return
            }
            #expect(closure.code == WebSocketCloseCode(rawValue: code), "\(path): \(closure)")
            var replies = server.replies.makeAsyncIterator()
            let reply = try #require(await replies.next())
            #expect(reply.opcode == 0x8 && reply.masked && reply.closeCode == code, "\(path): \(reply)")
        }
    }

    /// A 101 that turns on an extension or chooses a subprotocol the request did not offer
    /// fails the upgrade; one that chooses a subprotocol it did offer opens the connection.
    @Test(.hangGuard)
    func anUpgradeToWhatWasNotOfferedFails() async throws {
        try await HostileWebSocketServer.with { server in
            let client = Client(baseURL: URL(string: "http://127.0.0.1")!)
            for (path, named) in [("/unasked-extension", "the extension permessage-deflate"), ("/unasked-protocol", "the subprotocol chat")] {
                let error = await #expect(throws: TrellisError.self, "\(path)") {
                    _ = try await client.webSocket(for: Trellis.Request(method: .get, url: server.url.appending(path: path)), settings: .patient)
                }
                guard case .connectionFailed(let failure) = error else {
                    Issue.record("\(path): expected connectionFailed, got \(String(describing: error))")
                    continue
                }
                #expect(failure.reason.contains(named) && failure.reason.contains("did not offer"), "\(path): \(failure.reason)")
            }
            var offer = try Trellis.Request(method: .get, url: server.url.appending(path: "/chat"))
            offer.headerFields[HTTPField.Name("Sec-WebSocket-Protocol")!] = "superchat, chat"
            let connection = try await client.webSocket(for: offer, settings: .patient)
            var texts: [String] = []
            for try await message in connection.messages {
                if case .text(let text) = message { texts.append(text) }
            }
            #expect(texts == ["ok"])
        }
    }

    /// The control for the routes above: fragments with a ping between them make one message,
    /// and the ping is answered with a masked pong.
    @Test(.hangGuard)
    func fragmentsWithAPingBetweenThemMakeOneMessage() async throws {
        try await HostileWebSocketServer.with { server in
            let client = Client(baseURL: URL(string: "http://127.0.0.1")!)
            let connection = try await client.webSocket(for: Trellis.Request(method: .get, url: server.url.appending(path: "/fine")), settings: .patient)
            var texts: [String] = []
            for try await message in connection.messages {
                if case .text(let text) = message { texts.append(text) }
            }
            #expect(texts == ["ok", "fine"])
            var replies = server.replies.makeAsyncIterator()
            let reply = try #require(await replies.next())
            #expect(reply.opcode == 0xA && reply.masked, "\(reply)")
        }
    }
}
