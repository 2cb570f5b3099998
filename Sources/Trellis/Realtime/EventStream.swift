import Foundation
import HTTPTypes
import NIOCore

/// A `text/event-stream` as an asynchronous sequence of events, reconnecting when the
/// connection drops.
///
/// Events are read from the network as they are consumed: a slow consumer holds the
/// connection back rather than letting events pile up in memory. When the connection ends or
/// breaks, the stream waits for the server's `retry` delay (or ``defaultReconnectionDelay``)
/// and reconnects with `Last-Event-ID`, so the server can resume where it left off; a 204 from
/// the server ends the stream for good, as the specification says. Cancelling the consuming
/// task closes the connection and ends the sequence. The wait is taken on the client's clock
/// (``Client/Configuration-swift.struct/clock``), which a test moves by hand; a reconnection
/// that fails to connect throws.
///
/// A server cannot make the stream spin or swell: the wait is never shorter than
/// ``minimumReconnectionDelay`` (whatever `retry` says) and doubles, up to
/// ``maximumReconnectionDelay``, for each connection in a row that brought no event; an event
/// larger than the client's ``Client/Configuration/Limits/maximumEventSize`` fails the stream
/// with ``TrellisError/responseTooLarge(_:)``; and a connection that goes without a byte for the
/// idle timeout fails with ``TrellisError/timedOut(_:)`` (a server keeps a quiet stream open with
/// comment lines).
///
/// ```swift
/// for try await quote in client.events(for: request, as: Quote.self) {
///     print(quote.symbol, quote.price)
/// }
/// ```
public struct EventStream<Element: Sendable>: AsyncSequence, Sendable {
    /// The wait before reconnecting when the server has not set one with `retry`.
    public static var defaultReconnectionDelay: Duration { .seconds(3) }
    /// The shortest wait before reconnecting, whatever the server asks for.
    public static var minimumReconnectionDelay: Duration { .milliseconds(250) }
    /// The longest the wait grows to while connections bring no event.
    public static var maximumReconnectionDelay: Duration { .seconds(60) }

    let client: Client
    let request: Request
    let reconnects: Bool
    let transform: @Sendable (ServerSentEvent) throws -> Element?

    public func makeAsyncIterator() -> Iterator {
        Iterator(stream: self)
    }

    /// Reads events one connection at a time.
    public struct Iterator: AsyncIteratorProtocol {
        let stream: EventStream
        private var parser: EventStreamParser
        private var body: ChunkIterator?
        private var pending: [ServerSentEvent] = []
        private var connections = 0
        private var finished = false

        /// Connections in a row that ended without an event.
        private var fruitlessConnections = 0
        private var eventsOnThisConnection = false

        init(stream: EventStream) {
            self.stream = stream
            self.parser = EventStreamParser(maximumEventSize: stream.client.configuration.limits.maximumEventSize)
        }

        public mutating func next() async throws -> Element? {
            while !finished {
                if !pending.isEmpty {
                    let event = pending.removeFirst()
                    if let element = try stream.transform(event) { return element }
                    continue
                }
                guard var current = body else {
                    try await connect()
                    continue
                }
                do {
                    if let chunk = try await current.next() {
                        body = current
                        pending = try parser.parse(chunk.readableBytesView)
                        if !pending.isEmpty { eventsOnThisConnection = true }
                        continue
                    }
                } catch is CancellationError {
                    finished = true
                    throw CancellationError()
                } catch let error as TrellisError {
                    if !stream.reconnects || Self.wouldComeAgain(error) {
                        finished = true
                        throw error
                    }
                }
                // The connection ended (or broke): what was unfinished is dropped.
                body = nil
                parser.reset()
                try Task.checkCancellation()
                guard stream.reconnects else {
                    finished = true
                    return nil
                }
                fruitlessConnections = eventsOnThisConnection ? 0 : fruitlessConnections + 1
                eventsOnThisConnection = false
                try await stream.client.configuration.clock.sleep(for: reconnectionDelay())
            }
            return nil
        }

        /// The server's `retry` (or the default), at least the minimum, doubled for each
        /// connection in a row that brought no event.
        private func reconnectionDelay() -> Duration {
            let asked = Swift.max(parser.reconnectionTime ?? EventStream.defaultReconnectionDelay, EventStream.minimumReconnectionDelay)
            let ceiling = Swift.max(asked, EventStream.maximumReconnectionDelay)
            return asked.doubled(fruitlessConnections - 1, atMost: ceiling)
        }

        /// Whether the server's own doing ended the stream, which a reconnection would only
        /// meet again: an event too large, or framing that breaks HTTP.
        private static func wouldComeAgain(_ error: TrellisError) -> Bool {
            switch error {
            case .responseTooLarge: true
            case .connectionFailed(let failure): failure.isProtocolViolation
            default: false
            }
        }

        private mutating func connect() async throws {
            var request = stream.request
            request.headerFields[.accept] = "text/event-stream"
            request.headerFields[.cacheControl] = "no-store"
            if let lastEventID = parser.lastEventID {
                request.headerFields[HTTPField.Name("Last-Event-ID")!] = lastEventID
            }
            connections += 1
            let response = try await stream.client.send(request)
            if response.status.code == 204 {
                finished = true
                return
            }
            guard (200...299).contains(response.status.code) else {
                finished = true
                throw await stream.client.statusFailure(response, for: request)
            }
            let contentType = response.headerFields[.contentType]?.lowercased() ?? ""
            guard contentType.hasPrefix("text/event-stream") else {
                finished = true
                await response.body.discard()
                throw TrellisError.decodingFailed(DecodingFailure(
                    type: ServerSentEvent.self,
                    reason: "the response is \(contentType.isEmpty ? "without a Content-Type" : contentType), not text/event-stream",
                    status: response.status,
                    body: Data()
                ))
            }
            body = response.body.makeAsyncIterator()
        }
    }
}

extension Client {
    /// The server-sent events of `request`, reconnecting with `Last-Event-ID` when the
    /// connection drops (see ``EventStream``).
    public func events(for request: Request, reconnects: Bool = true) -> EventStream<ServerSentEvent> {
        EventStream(client: self, request: request, reconnects: reconnects) { $0 }
    }

    /// The data of each server-sent event decoded as JSON `type` with the client's decoder.
    ///
    /// - Parameters:
    ///   - request: the `GET` that opens the stream.
    ///   - type: what each event's data is decoded as.
    ///   - eventType: only events of this type are decoded; others are skipped. `nil`
    ///     decodes every event.
    ///   - reconnects: whether a dropped connection is opened again with `Last-Event-ID`.
    public func events<Value: Decodable & Sendable>(
        for request: Request,
        as type: Value.Type,
        eventType: String? = "message",
        reconnects: Bool = true
    ) -> EventStream<Value> {
        let decoder = self.decoder
        return EventStream(client: self, request: request, reconnects: reconnects) { event in
            if let eventType, event.type != eventType { return nil }
            do {
                return try decoder.decode(Value.self, from: Data(event.data.utf8))
            } catch {
                throw TrellisError.decodingFailed(DecodingFailure(
                    type: Value.self, error: error, status: .ok, body: Data(event.data.utf8)
                ))
            }
        }
    }
}
