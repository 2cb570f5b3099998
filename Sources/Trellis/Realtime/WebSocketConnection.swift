public import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import NIOWebSocket

/// An open WebSocket conversation.
///
/// Send with ``send(_:)-(String)``, ``send(_:)-(Data)`` or ``send(json:)``; read with
/// ``messages`` (or ``messages(as:)`` to decode JSON). Reading applies backpressure: while
/// you do not read, the connection stops reading from the network. Cancelling the task that
/// reads closes the connection.
///
/// ```swift
/// let chat = try await client.webSocket(for: Request(method: .get, url: chatURL))
/// try await chat.send("hello")
/// for try await message in chat.messages {
///     print(message)
/// }
/// ```
///
/// The message sequence ends when the server closes with 1000 (normal closure) or after
/// ``close(_:reason:)``; any other close code ends it with
/// ``TrellisError/webSocketClosed(_:)``, a lost connection or a missed pong with
/// ``TrellisError/connectionFailed(_:)``. With ``WebSocketSettings/reconnect`` the sequence
/// carries on over a new connection instead.
public final class WebSocketConnection: Sendable {
    private struct State {
        var link: WebSocketLink
        var generation = 0
        /// Set by ``close(_:reason:)``: nothing is reconnected after it.
        var closedByUs = false
    }

    private let state: NIOLockedValueBox<State>
    private let open: @Sendable () async throws -> WebSocketLink
    let options: WebSocketSettings
    /// The client's clock, which reconnections wait on.
    private let clock: any ClientClock
    private let encoder: JSONEncoder
    private let decoder: JSONDecoder
    /// The host, for errors.
    let host: String

    init(
        link: WebSocketLink,
        host: String,
        options: WebSocketSettings,
        clock: any ClientClock,
        encoder: JSONEncoder,
        decoder: JSONDecoder,
        open: @escaping @Sendable () async throws -> WebSocketLink
    ) {
        self.state = NIOLockedValueBox(State(link: link))
        self.host = host
        self.options = options
        self.clock = clock
        self.encoder = encoder
        self.decoder = decoder
        self.open = open
    }

    deinit {
        state.withLockedValue { $0.link.abort() }
    }

    /// The peer's close frame on the current connection, once one has arrived.
    public var closure: WebSocketClosure? {
        state.withLockedValue { $0.link.peerClosure }
    }

    /// Sends a text message.
    public func send(_ text: String) async throws {
        try await send(.text(text))
    }

    /// Sends a binary message.
    public func send(_ data: Data) async throws {
        try await send(.binary(data))
    }

    /// Sends `value` as a JSON text message, encoded with the client's encoder.
    public func send<Value: Encodable>(json value: Value) async throws {
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw TrellisError.invalidRequest(InvalidRequest(.body, "\(Value.self) could not be encoded as JSON: \(error)"))
        }
        try await send(.text(String(decoding: data, as: UTF8.self)))
    }

    /// Sends a message, waiting while the network is slower than the sender.
    public func send(_ message: WebSocketMessage) async throws {
        let link = state.withLockedValue { $0.link }
        try await link.send(message, host: host)
    }

    /// The messages the server sends, in order. Iterate it once.
    public var messages: WebSocketMessages {
        WebSocketMessages(connection: self)
    }

    /// The messages decoded from JSON (text or binary) with the client's decoder; a message
    /// that does not decode ends the sequence with ``TrellisError/decodingFailed(_:)``.
    public func messages<Value: Decodable & Sendable>(
        as type: Value.Type
    ) -> AsyncThrowingMapSequence<WebSocketMessages, Value> {
        let decoder = decoder
        return messages.map { message in
            let data: Data
            switch message {
            case .text(let text): data = Data(text.utf8)
            case .binary(let bytes): data = bytes
            }
            do {
                return try decoder.decode(Value.self, from: data)
            } catch {
                throw TrellisError.decodingFailed(DecodingFailure(type: Value.self, error: error, status: .switchingProtocols, body: data))
            }
        }
    }

    /// Closes the conversation with `code` and `reason`, and waits (up to
    /// ``WebSocketSettings/closeTimeout``) for the server to answer with its close frame.
    public func close(_ code: WebSocketCloseCode = .normalClosure, reason: String = "") async {
        let link = state.withLockedValue { state in
            state.closedByUs = true
            return state.link
        }
        await link.close(code: code, reason: reason, timeout: options.closeTimeout)
    }

    // MARK: Reading, for WebSocketMessages

    func current() -> (WebSocketLink, Int) {
        state.withLockedValue { ($0.link, $0.generation) }
    }

    var isClosedByUs: Bool {
        state.withLockedValue { $0.closedByUs }
    }

    func abort() {
        state.withLockedValue { $0.link.abort() }
    }

    /// Connects again after `generation`'s link ended with `error`, or rethrows it when the
    /// policy says not to (or its attempts run out).
    func reconnect(after generation: Int, failure error: any Error) async throws {
        guard let policy = options.reconnect, !isClosedByUs else { throw error }
        var attempt = 0
        var waited = Duration.zero
        var lastError = error
        while true {
            guard attempt < policy.maximumRetries,
                let delay = policy.delay(beforeRetry: attempt, after: nil, waitedSoFar: waited, now: clock.now)
            else { throw lastError }
            attempt += 1
            try await clock.sleep(for: delay)
            waited += delay
            // Closed meanwhile: the reader finds the conversation over.
            if isClosedByUs { return }
            do {
                let link = try await open()
                let installed = state.withLockedValue { state -> Bool in
                    guard !state.closedByUs, state.generation == generation else { return false }
                    state.link = link
                    state.generation += 1
                    return true
                }
                if !installed { link.abort() }
                return
            } catch let failure as TrellisError {
                lastError = failure
            }
        }
    }
}
