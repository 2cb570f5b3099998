import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Testing
import Trellis
import TrellisTesting

/// A WebSocket declared in a service.
@Service
protocol Rooms {
    @WebSocket("/rooms/{room}") @RequiresAccessToken
    func join(room: String) async throws -> WebSocketConnection
}

@Suite("WebSocket against a real server")
struct WebSocketIntegrationTests {
    private struct Note: Codable, Equatable, Sendable {
        var id: Int
        var text: String
    }

    /// The `http(s)://` base URL a client uses for a `ws(s)://` server URL.
    private func base(_ url: URL) -> URL {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.scheme = components.scheme == "wss" ? "https" : "http"
        return components.url!
    }

    private func request(_ url: URL, _ path: String) throws -> Trellis.Request {
        try Trellis.Request(method: .get, url: url.appending(path: path))
    }

    @Test func textBinaryAndJSONMessagesEchoInOrder() async throws {
        try await WebSocketTestServer.with({ $0.ws("echo", onUpgrade: WebSocketTestServer.echo) }) { url in
            let client = Client(baseURL: base(url))
            let socket = try await client.webSocket(for: request(url, "echo"), settings: .patient)
            var messages = socket.messages.makeAsyncIterator()

            try await socket.send("héllo ✓")
            #expect(try await messages.next() == .text("héllo ✓"))

            let bytes = Data((0..<256).map { UInt8($0) })
            try await socket.send(bytes)
            #expect(try await messages.next() == .binary(bytes))

            // 1 MiB in one message.
            let large = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try await socket.send(large)
            #expect(try await messages.next() == .binary(large))

            // Many small ones, sent without waiting, come back in order.
            for index in 0..<500 { try await socket.send("\(index)") }
            for index in 0..<500 {
                guard case .text(let text) = try await messages.next() else {
                    Issue.record("message \(index) missing")
                    return
                }
                #expect(text == "\(index)")
            }
            await socket.close()
            #expect(try await messages.next() == nil)
        }
    }

    @Test func jsonIsSentAndDecodedWithTheClientsCoders() async throws {
        try await WebSocketTestServer.with({ $0.ws("notes", onUpgrade: WebSocketTestServer.echo) }) { url in
            let client = Client(baseURL: base(url))
            let socket = try await client.webSocket(for: request(url, "notes"), settings: .patient)
            try await socket.send(json: Note(id: 1, text: "first"))
            try await socket.send(json: Note(id: 2, text: "second"))
            try await socket.send("{\"id\": \"not a number\"}")
            var notes = socket.messages(as: Note.self).makeAsyncIterator()
            #expect(try await notes.next() == Note(id: 1, text: "first"))
            #expect(try await notes.next() == Note(id: 2, text: "second"))
            let error = await #expect(throws: TrellisError.self) { _ = try await notes.next() }
            guard case .decodingFailed(let failure) = error else {
                Issue.record("expected decodingFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.codingPath == "id")
        }
    }

    @Test func aCloseCodeFromTheServerIsSurfaced() async throws {
        let routes: (Router<BasicWebSocketRequestContext>) -> Void = { router in
            router.ws("normal") { _, outbound, _ in
                try await outbound.write(.text("bye"))
                try await outbound.close(.normalClosure, reason: "done")
            }
            router.ws("policy") { _, outbound, _ in
                try await outbound.write(.text("bye"))
                try await outbound.close(.policyViolation, reason: "too chatty")
            }
        }
        try await WebSocketTestServer.with(routes) { url in
            let client = Client(baseURL: base(url))

            let normal = try await client.webSocket(for: request(url, "normal"), settings: .patient)
            var received: [Trellis.WebSocketMessage] = []
            for try await message in normal.messages { received.append(message) }
            #expect(received == [.text("bye")])
            #expect(normal.closure == WebSocketClosure(code: .normalClosure, reason: "done"))

            let refused = try await client.webSocket(for: request(url, "policy"), settings: .patient)
            var messages = refused.messages.makeAsyncIterator()
            #expect(try await messages.next() == .text("bye"))
            let error = await #expect(throws: TrellisError.self) { _ = try await messages.next() }
            guard case .webSocketClosed(let closure) = error else {
                Issue.record("expected webSocketClosed, got \(String(describing: error))")
                return
            }
            #expect(closure == WebSocketClosure(code: .policyViolation, reason: "too chatty"))
            #expect(refused.closure == closure)
        }
    }

    @Test func closingFromTheClientEndsTheServersConversation() async throws {
        let (ended, endedSink) = AsyncStream.makeStream(of: String.self)
        let routes: (Router<BasicWebSocketRequestContext>) -> Void = { router in
            router.ws("quiet") { inbound, _, _ in
                for try await _ in inbound.messages(maxSize: 1024) {}
                endedSink.yield("inbound ended")
            }
        }
        try await WebSocketTestServer.with(routes) { url in
            let socket = try await Client(baseURL: base(url)).webSocket(for: request(url, "quiet"), settings: .patient)
            try await socket.send("one")
            await socket.close(.goingAway, reason: "leaving")
            // The server's answering close frame, seen though nothing was reading.
            #expect(socket.closure != nil)
            var events = ended.makeAsyncIterator()
            #expect(await events.next() == "inbound ended")
            let error = await #expect(throws: TrellisError.self) { try await socket.send("late") }
            guard case .connectionFailed = error else {
                Issue.record("expected connectionFailed, got \(String(describing: error))")
                return
            }
        }
    }

    @Test func cancellingTheReaderClosesTheConnection() async throws {
        let (events, sink) = AsyncStream.makeStream(of: String.self)
        let routes: (Router<BasicWebSocketRequestContext>) -> Void = { router in
            router.ws("hold") { inbound, outbound, _ in
                try await outbound.write(.text("ready"))
                for try await _ in inbound.messages(maxSize: 1024) {}
                sink.yield("closed")
            }
        }
        try await WebSocketTestServer.with(routes) { url in
            let socket = try await Client(baseURL: base(url)).webSocket(for: request(url, "hold"), settings: .patient)
            let (started, startedSink) = AsyncStream.makeStream(of: Void.self)
            let reader = Task {
                var count = 0
                for try await _ in socket.messages {
                    count += 1
                    startedSink.yield()
                }
                return count
            }
            var startedIterator = started.makeAsyncIterator()
            await startedIterator.next()
            reader.cancel()
            let result = await reader.result
            #expect(throws: CancellationError.self) { try result.get() }
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == "closed")
        }
    }

    @Test(.hangGuard) func anUnansweredPingEndsTheConnection() async throws {
        let server = try await RawWebSocketServer(scripts: [.silent])
        let client = Client(baseURL: base(server.url))
        let options = WebSocketSettings(pingInterval: .milliseconds(50), pingTimeout: .milliseconds(100))
        let socket = try await client.webSocket(for: Trellis.Request(method: .get, url: server.url), settings: options)
        var messages = socket.messages.makeAsyncIterator()
        let error = await #expect(throws: TrellisError.self) { _ = try await messages.next() }
        guard case .connectionFailed(let failure) = error else {
            Issue.record("expected connectionFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.reason.contains("no pong"))
        try await server.stop()
    }

    @Test(.hangGuard) func aDroppedConnectionIsReconnectedWithBackoff() async throws {
        let server = try await RawWebSocketServer(scripts: [.sendThenDrop("one"), .sendThenClose("two")])
        let policy = RetryPolicy(maximumRetries: 3, initialDelay: .milliseconds(100), jitter: 0)
        let clock = ManualClock(advancesWhenSleeping: true)
        let client = Client(baseURL: base(server.url)) { $0.clock = clock }
        let socket = try await client.webSocket(
            for: Trellis.Request(method: .get, url: server.url),
            settings: WebSocketSettings(reconnect: policy)
        )
        var received: [Trellis.WebSocketMessage] = []
        for try await message in socket.messages { received.append(message) }
        #expect(received == [.text("one"), .text("two")])
        #expect(server.connectionCount == 2)
        #expect(clock.sleeps == [.milliseconds(100)])
        #expect(socket.closure?.code == .normalClosure)
        try await server.stop()
    }

    @Test(.hangGuard) func withoutReconnectionADroppedConnectionIsAnError() async throws {
        let server = try await RawWebSocketServer(scripts: [.sendThenDrop("one")])
        let socket = try await Client(baseURL: base(server.url)).webSocket(for: Trellis.Request(method: .get, url: server.url), settings: .patient)
        var messages = socket.messages.makeAsyncIterator()
        #expect(try await messages.next() == .text("one"))
        let error = await #expect(throws: TrellisError.self) { _ = try await messages.next() }
        guard case .connectionFailed(let failure) = error else {
            Issue.record("expected connectionFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.reason.contains("without a close frame"))
        #expect(server.connectionCount == 1)
        try await server.stop()
    }

    @Test(.hangGuard) func textThatIsNotUTF8IsRefusedWith1007() async throws {
        let server = try await RawWebSocketServer(scripts: [.sendText([0x6F, 0x6B, 0xC3, 0x28])])
        let socket = try await Client(baseURL: base(server.url)).webSocket(for: Trellis.Request(method: .get, url: server.url), settings: .patient)
        var messages = socket.messages.makeAsyncIterator()
        let error = await #expect(throws: TrellisError.self) { _ = try await messages.next() }
        guard case .webSocketClosed(let closure) = error else {
            Issue.record("expected webSocketClosed, got \(String(describing: error))")
            return
        }
        #expect(closure.code == .invalidPayload)
        // The server is told why, with the close frame's code.
        var codes = server.closeCodes.makeAsyncIterator()
        #expect(await codes.next() == 1007)
        try await server.stop()
    }

    @Test func aMessageOverTheLimitIsRefusedWith1009() async throws {
        try await WebSocketTestServer.with({ $0.ws("echo", onUpgrade: WebSocketTestServer.echo) }) { url in
            let socket = try await Client(baseURL: base(url)).webSocket(
                for: request(url, "echo"),
                settings: WebSocketSettings(maximumMessageSize: 1000)
            )
            try await socket.send(Data(count: 999))
            try await socket.send(Data(count: 2000))
            var messages = socket.messages.makeAsyncIterator()
            #expect(try await messages.next() == .binary(Data(count: 999)))
            let error = await #expect(throws: TrellisError.self) { _ = try await messages.next() }
            guard case .webSocketClosed(let closure) = error else {
                Issue.record("expected webSocketClosed, got \(String(describing: error))")
                return
            }
            #expect(closure.code == .messageTooBig)
        }
    }

    @Test func theAccessTokenIsSentAndARefusedOneRefreshed() async throws {
        let server = try await RawWebSocketServer(scripts: [.requireAuthorization("Bearer fresh")])
        let url = server.url
        let refreshes = NIOLockedValueBox(0)
        let storage = InMemoryAccessTokenStorage(["TrellisToken": AccessToken(accessToken: "stale")])
        let client = Client(baseURL: base(url)) { $0.accessTokens = AccessTokenSettings(storage: storage) }
        var upgrade = try Trellis.Request(method: .get, url: url)
        upgrade.accessToken = AccessTokenRequirement(label: "TrellisToken") { _ in
            refreshes.withLockedValue { $0 += 1 }
            return AccessToken(accessToken: "fresh")
        }
        let socket = try await client.webSocket(for: upgrade, settings: .patient)
        var messages = socket.messages.makeAsyncIterator()
        #expect(try await messages.next() == .text("Bearer fresh"))
        #expect(refreshes.withLockedValue { $0 } == 1)
        #expect(server.connectionCount == 2)

        // Without a way to refresh, the refusal is the caller's.
        let refusing = Client(baseURL: base(url)) {
            $0.accessTokens = AccessTokenSettings(storage: InMemoryAccessTokenStorage(["TrellisToken": AccessToken(accessToken: "stale")]))
        }
        var plain = try Trellis.Request(method: .get, url: url)
        plain.requireAccessToken()
        let error = await #expect(throws: TrellisError.self) { _ = try await refusing.webSocket(for: plain, settings: .patient) }
        guard case .unacceptableStatus(let failure) = error else {
            Issue.record("expected unacceptableStatus, got \(String(describing: error))")
            return
        }
        #expect(failure.status == .unauthorized)
        try await server.stop()
    }

    @Test func aServiceDeclaresTheWebSocketWithItsPathAndToken() async throws {
        let routes: (Router<BasicWebSocketRequestContext>) -> Void = { router in
            router.ws("rooms/:room") { _, outbound, context in
                try await outbound.write(.text(context.request.uri.path))
                try await outbound.write(.text(context.request.headers[.authorization] ?? "none"))
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
        try await WebSocketTestServer.with(routes) { url in
            let storage = InMemoryAccessTokenStorage([AccessTokenRequirement.defaultLabel: AccessToken(accessToken: "secret")])
            let rooms = RoomsService(client: Client(baseURL: base(url)) { $0.accessTokens = AccessTokenSettings(storage: storage) })
            let socket = try await rooms.join(room: "tea & cake")
            var received: [Trellis.WebSocketMessage] = []
            for try await message in socket.messages { received.append(message) }
            #expect(received == [.text("/rooms/tea%20%26%20cake"), .text("Bearer secret")])
        }
    }

    /// A service of WebSockets can take the server's ws:// URL as its base, as
    /// `client.webSocket(for:)` takes one.
    @Test func aServiceOfWebSocketsTakesAWebSocketBaseURL() async throws {
        let routes: (Router<BasicWebSocketRequestContext>) -> Void = { router in
            router.ws("rooms/:room") { _, outbound, context in
                try await outbound.write(.text(context.request.uri.path))
                try await outbound.write(.text(context.request.headers[.authorization] ?? "none"))
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
        try await WebSocketTestServer.with(routes) { url in
            #expect(url.scheme == "ws")
            let storage = InMemoryAccessTokenStorage([AccessTokenRequirement.defaultLabel: AccessToken(accessToken: "secret")])
            let rooms = RoomsService(client: Client(baseURL: url) { $0.accessTokens = AccessTokenSettings(storage: storage) })
            let socket = try await rooms.join(room: "lobby")
            var received: [Trellis.WebSocketMessage] = []
            for try await message in socket.messages { received.append(message) }
            // The token goes to the service's own origin, which ws:// names as http:// does.
            #expect(received == [.text("/rooms/lobby"), .text("Bearer secret")])
        }
    }

    @Test func wssWithAPinnedCertificate() async throws {
        let certificates = try TestCertificates()
        let stranger = try TestCertificates()
        let upgrades = NIOLockedValueBox(0)
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificates.leaf)],
            privateKey: .privateKey(certificates.leafKey)
        )
        let routes: (Router<BasicWebSocketRequestContext>) -> Void = { router in
            router.ws("echo") { _, _ in
                upgrades.withLockedValue { $0 += 1 }
                return .upgrade([:])
            } onUpgrade: { inbound, outbound, context in
                try await WebSocketTestServer.echo(inbound, outbound, context)
            }
        }
        try await WebSocketTestServer.with(tls: tls, routes) { url in
            let pinned = try CertificatePinning([PinnedHost("localhost", certificates: [PinnedCertificate(der: certificates.leaf.toDERBytes())])])
            let client = Client(baseURL: base(url)) { $0.security.pinning = pinned }
            let socket = try await client.webSocket(for: request(url, "echo"), settings: .patient)
            try await socket.send("over TLS")
            var messages = socket.messages.makeAsyncIterator()
            #expect(try await messages.next() == .text("over TLS"))
            await socket.close()

            let wrongKey = try CertificatePinning([
                PinnedHost("localhost", certificates: [PinnedCertificate(der: certificates.authority.toDERBytes())], publicKeys: [PinnedCertificate(der: stranger.leaf.toDERBytes()).publicKeyPin])
            ])
            let refusing = Client(baseURL: base(url)) { $0.security.pinning = wrongKey }
            let error = await #expect(throws: TrellisError.self) { _ = try await refusing.webSocket(for: request(url, "echo"), settings: .patient) }
            guard case .pinningFailed(let failure) = error else {
                Issue.record("expected pinningFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.reason.contains("public key"))

            // Without pins, the test certificate is not trusted.
            let untrusting = Client(baseURL: base(url))
            let untrusted = await #expect(throws: TrellisError.self) { _ = try await untrusting.webSocket(for: request(url, "echo"), settings: .patient) }
            guard case .tlsFailed = untrusted else {
                Issue.record("expected tlsFailed, got \(String(describing: untrusted))")
                return
            }
        }
        #expect(upgrades.withLockedValue { $0 } == 1)
    }

    @Test func aRefusedUpgradeIsAStatusFailure() async throws {
        try await WebSocketTestServer.with({ _ in }) { url in
            let client = Client(baseURL: base(url))
            let error = await #expect(throws: TrellisError.self) { _ = try await client.webSocket(for: request(url, "nowhere"), settings: .patient) }
            guard case .unacceptableStatus(let failure) = error else {
                Issue.record("expected unacceptableStatus, got \(String(describing: error))")
                return
            }
            // Hummingbird answers every upgrade it declines with 400.
            #expect(failure.status == .badRequest)
        }
        let client = Client(baseURL: URL(string: "http://127.0.0.1:1")!)
        let refused = await #expect(throws: TrellisError.self) {
            _ = try await client.webSocket(for: Trellis.Request(method: .get, url: URL(string: "ws://127.0.0.1:1/x")!), settings: .patient)
        }
        guard case .connectionFailed = refused else {
            Issue.record("expected connectionFailed, got \(String(describing: refused))")
            return
        }
    }
}
