public import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket

/// One WebSocket message: text or binary, whole (fragments are reassembled).
public enum WebSocketMessage: Sendable, Equatable {
    /// A text message (UTF-8 on the wire).
    case text(String)
    /// A binary message.
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

    /// A close with `code` (`nil` when the close frame carried none) and `reason`.
    public init(code: WebSocketCloseCode?, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String {
        let code = code.map { "\($0.rawValue)" } ?? "no code"
        return reason.isEmpty ? code : "\(code) \(reason)"
    }
}
