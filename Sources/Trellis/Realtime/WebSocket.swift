public import Foundation
import NIOConcurrencyHelpers
import NIOCore
public import NIOSSL
import NIOWebSocket

/// One WebSocket message: text or binary, whole (fragments are reassembled).
public enum WebSocketMessage: Sendable, Equatable {
    case text(String)
    case binary(Data)
}

/// A WebSocket close code (RFC 6455, section 7.4).
public struct WebSocketCloseCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt16

    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// 1000: the purpose of the connection is fulfilled.
    public static let normalClosure = Self(rawValue: 1000)
    /// 1001: the endpoint is going away (a server shutting down, a page left).
    public static let goingAway = Self(rawValue: 1001)
    /// 1002: a protocol error.
    public static let protocolError = Self(rawValue: 1002)
    /// 1003: a kind of data the endpoint does not accept.
    public static let unsupportedData = Self(rawValue: 1003)
    /// 1007: data inconsistent with its message type (text that is not UTF-8).
    public static let invalidPayload = Self(rawValue: 1007)
    /// 1008: a message that violates the endpoint's policy.
    public static let policyViolation = Self(rawValue: 1008)
    /// 1009: a message too big to process.
    public static let messageTooBig = Self(rawValue: 1009)
    /// 1011: the server met an unexpected condition.
    public static let internalError = Self(rawValue: 1011)
    /// 1012: the service is restarting.
    public static let serviceRestart = Self(rawValue: 1012)
    /// 1013: try again later.
    public static let tryAgainLater = Self(rawValue: 1013)

    /// The codes after which a reconnecting connection connects again: the server going away
    /// or restarting is not the end of the conversation.
    static let transient: Set<Self> = [.goingAway, .internalError, .serviceRestart, .tryAgainLater]

    public var description: String { "\(rawValue)" }
}

/// How a WebSocket conversation was closed by the peer: its close code (none when the close
/// frame carried none) and reason.
public struct WebSocketClosure: Sendable, Equatable, CustomStringConvertible {
    /// The code from the close frame.
    public let code: WebSocketCloseCode?
    /// The reason from the close frame; often empty.
    public let reason: String

    public init(code: WebSocketCloseCode?, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String {
        let code = code.map { "\($0.rawValue)" } ?? "no code"
        return reason.isEmpty ? code : "\(code) \(reason)"
    }
}

/// How a ``WebSocketConnection`` behaves.
public struct WebSocketOptions: Sendable {
    /// How often a ping is sent while the connection is open; `nil` sends none.
    public var pingInterval: Duration?
    /// How long a ping may go unanswered before the connection counts as lost.
    public var pingTimeout: Duration
    /// The largest message accepted (after reassembly); a larger one closes the connection
    /// with 1009.
    public var maximumMessageSize: Int
    /// Connect again after the connection is lost or the server closes it with 1001, 1011,
    /// 1012 or 1013, waiting as the policy says between attempts (its `maximumRetries` bounds
    /// consecutive failed attempts). `nil` (the default) does not reconnect.
    public var reconnect: RetryPolicy?
    /// How long ``WebSocketConnection/close(_:reason:)`` waits for the server's close frame.
    public var closeTimeout: Duration
    /// How long the TCP connection, TLS handshake and upgrade may take.
    public var connectTimeout: Duration
    /// The TLS settings for `wss://`; system trust by default. The client's pins apply on
    /// top of them.
    public var tlsConfiguration: TLSConfiguration?

    public init(
        pingInterval: Duration? = .seconds(30),
        pingTimeout: Duration = .seconds(10),
        maximumMessageSize: Int = 16 * 1024 * 1024,
        reconnect: RetryPolicy? = nil,
        closeTimeout: Duration = .seconds(5),
        connectTimeout: Duration = .seconds(10),
        tlsConfiguration: TLSConfiguration? = nil
    ) {
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.maximumMessageSize = maximumMessageSize
        self.reconnect = reconnect
        self.closeTimeout = closeTimeout
        self.connectTimeout = connectTimeout
        self.tlsConfiguration = tlsConfiguration
    }
}

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
/// ``TrellisError/connectionFailed(_:)``. With ``WebSocketOptions/reconnect`` the sequence
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
    let options: WebSocketOptions
    private let encoder: JSONEncoder
    private let decoder: JSONDecoder
    /// The host, for errors.
    let host: String

    init(
        link: WebSocketLink,
        host: String,
        options: WebSocketOptions,
        encoder: JSONEncoder,
        decoder: JSONDecoder,
        open: @escaping @Sendable () async throws -> WebSocketLink
    ) {
        self.state = NIOLockedValueBox(State(link: link))
        self.host = host
        self.options = options
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
    /// ``WebSocketOptions/closeTimeout``) for the server to answer with its close frame.
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
                let delay = policy.delay(beforeRetry: attempt, after: nil, waitedSoFar: waited)
            else { throw lastError }
            attempt += 1
            try await policy.sleep(delay)
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

/// The messages of a ``WebSocketConnection``.
public struct WebSocketMessages: AsyncSequence, Sendable {
    public typealias Element = WebSocketMessage

    let connection: WebSocketConnection

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(connection: connection)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let connection: WebSocketConnection
        private var generation = -1
        private var frames: WebSocketFrames?
        private var finished = false

        init(connection: WebSocketConnection) {
            self.connection = connection
        }

        public mutating func next() async throws -> WebSocketMessage? {
            while !finished {
                let (link, generation) = connection.current()
                if generation != self.generation {
                    self.generation = generation
                    frames = link.frames()
                }
                guard let frames else { return nil }
                var ending: TrellisError
                do {
                    if let message = try await frames.nextMessage(
                        maximumSize: connection.options.maximumMessageSize,
                        host: connection.host
                    ) {
                        return message
                    }
                    try Task.checkCancellation()
                    // A close frame, or the end of the connection without one.
                    if let closure = link.peerClosure {
                        guard !connection.isClosedByUs, let code = closure.code, code != .normalClosure else {
                            finished = true
                            return nil
                        }
                        ending = .webSocketClosed(closure)
                        if !WebSocketCloseCode.transient.contains(code) { throw ending }
                    } else if connection.isClosedByUs {
                        finished = true
                        return nil
                    } else {
                        ending = .connectionFailed(ConnectionFailure(host: connection.host, reason: "the WebSocket connection ended without a close frame"))
                    }
                } catch let error as TrellisError where error.isConnectionLoss {
                    ending = error
                } catch {
                    finish()
                    throw error
                }
                do {
                    try await connection.reconnect(after: generation, failure: ending)
                } catch {
                    finish()
                    throw error
                }
            }
            return nil
        }

        private mutating func finish() {
            finished = true
            connection.abort()
        }
    }
}
