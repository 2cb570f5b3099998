public import NIOSSL

/// How a ``WebSocketConnection`` behaves.
public struct WebSocketSettings: Sendable {
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

    /// Settings for a WebSocket connection; each default is the one its property states.
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

/// The former name of ``WebSocketSettings``: every group of settings is named `…Settings`.
@available(*, deprecated, renamed: "WebSocketSettings")
public typealias WebSocketOptions = WebSocketSettings
