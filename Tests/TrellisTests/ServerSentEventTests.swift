import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import Trellis

@Suite("Server-sent events: parsing")
struct EventStreamParserTests {
    private func parse(_ text: String, chunked size: Int? = nil) -> [ServerSentEvent] {
        var parser = EventStreamParser()
        let bytes = Array(text.utf8)
        do {
            guard let size else { return try parser.parse(bytes) }
            return try stride(from: 0, to: bytes.count, by: size).flatMap { try parser.parse(bytes[$0..<min($0 + size, bytes.count)]) }
        } catch {
            Issue.record("the parser threw \(error)")
            return []
        }
    }

    @Test func multiLineDataIsJoinedWithLineFeeds() {
        // The specification's stock-ticker example.
        #expect(parse("data: YHOO\ndata: +2\ndata: 10\n\n") == [ServerSentEvent(data: "YHOO\n+2\n10")])
    }

    @Test func commentsIdsAndEventTypes() {
        let text = ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n"
        #expect(parse(text) == [
            ServerSentEvent(data: "first event", id: "1"),
            ServerSentEvent(data: "second event", id: ""),
        ])
        #expect(parse("event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\n").map(\.type) == ["add", "remove"])
    }

    @Test func emptyDataAndFieldsWithoutColons() {
        // "data" alone is an empty data line; the last block has no blank line after it.
        #expect(parse("data\n\ndata\ndata\n\ndata:") == [ServerSentEvent(data: ""), ServerSentEvent(data: "\n")])
        #expect(parse("data:test\n\ndata: test\n\n") == [ServerSentEvent(data: "test"), ServerSentEvent(data: "test")])
        #expect(parse("id: 7\n\n").isEmpty)
    }

    @Test(arguments: [nil, 1, 2, 3])
    func everyLineEndingAndABOMWhereverTheChunksSplit(_ size: Int?) {
        let text = "\u{FEFF}data: a\r\ndata: b\rdata: c\n\r\nevent: x\rdata: d\r\r"
        #expect(parse(text, chunked: size) == [ServerSentEvent(data: "a\nb\nc"), ServerSentEvent(type: "x", data: "d")])
    }

    @Test func retryTakesDigitsOnlyAndIdsWithNulAreIgnored() throws {
        var parser = EventStreamParser()
        let events = try parser.parse(Array("retry: 2500\nid: a\u{0}b\ndata: x\n\nretry: 1.5\ndata: y\n\n".utf8))
        #expect(events == [ServerSentEvent(data: "x", retry: .milliseconds(2500)), ServerSentEvent(data: "y")])
        #expect(parser.reconnectionTime == .milliseconds(2500))
        #expect(parser.lastEventID == nil)
    }
}

/// A stream that sends events 1...3 on its first connection, then closes; a reconnection
/// with `Last-Event-ID` gets the events after it, and 204 once there are none left.
final class TickerRoutes: Sendable {
    private let lastEventIDs = NIOLockedValueBox<[String?]>([])

    var reconnectionHeaders: [String?] { lastEventIDs.withLockedValue { $0 } }

    func install(_ router: Router<BasicRequestContext>) {
        router.get("ticker") { request, _ in
            let last = request.headers[HTTPField.Name("Last-Event-ID")!]
            self.lastEventIDs.withLockedValue { $0.append(last) }
            let start = (last.flatMap { Int($0) } ?? 0) + 1
            guard start <= 6 else { return Response(status: .noContent) }
            var text = "retry: 25\n"
            for id in start..<min(start + 3, 7) {
                text += "id: \(id)\nevent: \(id % 2 == 0 ? "even" : "message")\ndata: {\"price\": \(id * 10)}\n\n"
            }
            // An unfinished block at the end: dropped when the connection closes.
            text += "data: {\"price\": -1}\n"
            return Response(status: .ok, headers: [.contentType: "text/event-stream"], body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        router.get("not-a-stream") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{}")))
        }
    }
}

struct Tick: Decodable, Equatable, Sendable {
    var price: Int
}

/// Event streams declared in a service.
@Service
protocol Ticker {
    @GET("/ticker")
    func ticks() async throws -> EventStream<Tick>

    @GET("/ticker")
    func events() async throws -> EventStream<ServerSentEvent>
}

@Suite("Server-sent events against a server")
struct ServerSentEventIntegrationTests {
    @Test(arguments: TransportKind.allCases)
    func eventsAreReadAcrossReconnectionsWithLastEventID(_ kind: TransportKind) async throws {
        let ticker = TickerRoutes()
        try await TestServer.with(ticker.install) { url in
            let sleeper = RecordingSleeper()
            let client = Client(baseURL: url, transport: kind.transport) { sleeper.retry(&$0, maximumRetries: 0) }
            var events: [ServerSentEvent] = []
            for try await event in client.events(for: try Trellis.Request(method: .get, url: url.appending(path: "ticker"))) {
                events.append(event)
            }
            #expect(events.map(\.id) == ["1", "2", "3", "4", "5", "6"])
            #expect(events.map(\.type) == ["message", "even", "message", "even", "message", "even"])
            #expect(ticker.reconnectionHeaders == [nil, "3", "6"])
            // The server's `retry: 25` is under the floor, which sets the wait instead; each
            // connection brought events, so the waits do not grow.
            #expect(sleeper.recorded == [EventStream<ServerSentEvent>.minimumReconnectionDelay, .milliseconds(250)])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func eventDataIsDecodedForTheChosenType(_ kind: TransportKind) async throws {
        let ticker = TickerRoutes()
        try await TestServer.with(ticker.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.retry = RecordingSleeper().policy(maximumRetries: 0) }
            let request = try Trellis.Request(method: .get, url: url.appending(path: "ticker"))
            var ticks: [Tick] = []
            for try await tick in client.events(for: request, as: Tick.self) { ticks.append(tick) }
            #expect(ticks == [Tick(price: 10), Tick(price: 30), Tick(price: 50)])

            let error = await #expect(throws: TrellisError.self) {
                for try await _ in client.events(for: try Trellis.Request(method: .get, url: url.appending(path: "not-a-stream"))) {}
            }
            #expect("\(String(describing: error))".contains("not text/event-stream"))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aServiceFunctionReturnsTheEventStream(_ kind: TransportKind) async throws {
        let ticker = TickerRoutes()
        try await TestServer.with(ticker.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.retry = RecordingSleeper().policy(maximumRetries: 0) }
            let service = TickerService(client: client)
            var ticks: [Tick] = []
            for try await tick in try await service.ticks() { ticks.append(tick) }
            #expect(ticks == [Tick(price: 10), Tick(price: 30), Tick(price: 50)])
            var ids: [String?] = []
            for try await event in try await service.events() { ids.append(event.id) }
            #expect(ids == ["1", "2", "3", "4", "5", "6"])
            #expect(ticker.reconnectionHeaders == [nil, "3", "6", nil, "3", "6"])
        }
    }

    @Test(.hangGuard, arguments: TransportKind.allCases)
    func cancellingTheConsumerClosesTheConnection(_ kind: TransportKind) async throws {
        let server = try await FaultServer()
        let client = Client(baseURL: server.url, transport: kind.transport)
        let request = try Trellis.Request(method: .get, url: server.url.appending(path: "events-hold"))
        let (received, receivedSink) = AsyncStream.makeStream(of: String.self)
        let consumer = Task {
            for try await event in client.events(for: request) { receivedSink.yield(event.data) }
        }
        var iterator = received.makeAsyncIterator()
        #expect(await iterator.next() == "first")
        consumer.cancel()
        _ = await consumer.result
        var closes = server.closes.makeAsyncIterator()
        await closes.next()
        #expect(server.connectionCounts.closed == 1)
        try await server.stop()
    }
}
