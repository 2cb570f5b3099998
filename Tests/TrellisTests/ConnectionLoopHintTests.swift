import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import Trellis

/// A buffered call made alone asks AsyncHTTPClient to run its delegate on the event loop its
/// connections last read on, so that the connection and the delegate share a thread; calls
/// that overlap leave the choice to AsyncHTTPClient.
@Suite("The event loop a call prefers")
struct ConnectionLoopHintTests {
    @Test
    func callsOneAfterAnotherPreferTheLoopTheirConnectionReadOn() async throws {
        try await TestServer.with(TestRoutes.install) { url in
            // The caller's own connection initializer: it must still run, and it tells which
            // loop each connection is on.
            let opened = NIOLockedValueBox<[ObjectIdentifier]>([])
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            configuration.http1_1ConnectionDebugInitializer = { channel in
                opened.withLockedValue { $0.append(ObjectIdentifier(channel.eventLoop)) }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            let transport = AsyncHTTPClientTransport(configuration: configuration)
            let client = Client(baseURL: url, transport: transport)
            let request = try Request(method: .get, url: url.appending(path: "text"))
            let hint = try #require(transport.loopHints.first)
            #expect(hint.loop == nil, "no connection has read yet")

            for _ in 0..<5 {
                #expect(try await client.value(for: request, as: String.self) == "héllo, world")
            }

            let loops = opened.withLockedValue { $0 }
            #expect(loops.count == 1, "calls one after another share one connection")
            let preferred = try #require(hint.loop)
            #expect(ObjectIdentifier(preferred) == loops.first)

            // A call alone prefers that loop; one that overlaps it does not.
            let alone = hint.begin()
            let overlapping = hint.begin()
            #expect(alone.map(ObjectIdentifier.init) == loops.first)
            #expect(overlapping == nil)
            hint.end()
            hint.end()
            #expect(hint.begin().map(ObjectIdentifier.init) == loops.first, "alone again once the others ended")
            hint.end()
            try await transport.shutdown()
        }
    }

    /// A body in memory goes out whole whichever way the call takes: over the delegate API when
    /// it is made alone, over the async API while another call is under way.
    @Test
    func aBodySentAloneOrBesideAnotherCallArrivesWhole() async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let transport = AsyncHTTPClientTransport()
            let client = Client(baseURL: url, transport: transport)
            let hint = try #require(transport.loopHints.first)
            func post(_ text: String) async throws -> Echo {
                var request = try Request(method: .post, url: url.appending(path: "echo/notes"))
                request.body = RequestBody(text)
                return try await client.value(for: request, as: Echo.self)
            }
            _ = try await post("opens the connection")
            #expect(hint.loop != nil)

            let alone = try await post("sent alone, é")
            #expect(alone.body == "sent alone, é")
            #expect(alone.headers["content-length"] == "\(Array("sent alone, é".utf8).count)")

            // Another call under way: the body goes through the async API.
            #expect(hint.begin() != nil)
            let beside = try await post("sent beside another")
            hint.end()
            #expect(beside.body == "sent beside another")
            #expect(beside.headers["content-length"] == "19")
            try await transport.shutdown()
        }
    }

    /// A call whose body streams takes the async API; while it is under way, another call is
    /// not alone. (The limit turns a call that fails before asking for its body, which would
    /// leave the test waiting for the signal, into a failure.)
    @Test(.hangGuard)
    func aCallStreamingItsBodyCountsAsUnderWay() async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let transport = AsyncHTTPClientTransport()
            let client = Client(baseURL: url, transport: transport)
            let hint = try #require(transport.loopHints.first)
            _ = try await client.value(for: try Request(method: .get, url: url.appending(path: "text")), as: String.self)
            #expect(hint.loop != nil)

            let (started, start) = AsyncStream<Void>.makeStream()
            let (gate, open) = AsyncStream<Void>.makeStream()
            var request = try Request(method: .post, url: url.appending(path: "echo/notes"))
            // The first chunk is asked for once the call is under way; it waits for the gate.
            request.body = RequestBody(length: nil, replayingChunks: {
                var sent = false
                return ChunkIterator {
                    guard !sent else { return nil }
                    sent = true
                    start.yield()
                    for await _ in gate { break }
                    return ByteBuffer(string: "streamed")
                }
            })
            let call = Task { try await client.value(for: request, as: Echo.self) }
            for await _ in started { break }
            #expect(hint.begin() == nil, "the streaming call is under way")
            hint.end()
            open.yield()
            #expect(try await call.value.body == "streamed")
            #expect(hint.begin() != nil, "alone again once it ended")
            hint.end()
            try await transport.shutdown()
        }
    }

    @Test
    func aTransportOverTheCallersClientPrefersNoLoop() async throws {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let transport = AsyncHTTPClientTransport(httpClient: http)
        #expect(transport.loopHints.isEmpty, "connections of a client Trellis did not make are not watched")
        try await http.shutdown()
    }
}
