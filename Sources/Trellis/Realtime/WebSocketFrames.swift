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

/// The data frames of one link, reassembled into messages.
final class WebSocketFrames {
    private var iterator: NIOAsyncChannelInboundStream<WebSocketFrame>.AsyncIterator
    /// Sends a close frame with this code, then closes: for a message Trellis refuses.
    private let refuse: @Sendable (WebSocketCloseCode, String) -> Void

    init(
        _ iterator: NIOAsyncChannelInboundStream<WebSocketFrame>.AsyncIterator,
        refuse: @escaping @Sendable (WebSocketCloseCode, String) -> Void
    ) {
        self.iterator = iterator
        self.refuse = refuse
    }

    private func refusal(_ code: WebSocketCloseCode, _ reason: String) -> TrellisError {
        refuse(code, reason)
        return .webSocketClosed(WebSocketClosure(code: code, reason: reason))
    }

    /// The next whole message, or `nil` at a close frame or the end of the connection.
    func nextMessage(maximumSize: Int, host: String) async throws -> WebSocketMessage? {
        var pending: (opcode: WebSocketOpcode, buffer: ByteBuffer)?
        while true {
            let frame: WebSocketFrame?
            do {
                frame = try await iterator.next()
            } catch let violation as WebSocketProtocolViolation {
                throw TrellisError.webSocketClosed(WebSocketClosure(code: violation.code, reason: violation.reason))
            } catch let error as WebSocketPingTimeout {
                throw TrellisError.connectionFailed(ConnectionFailure(
                    host: host,
                    reason: "no pong within \(error.timeout) of a ping: the WebSocket connection counts as lost",
                    underlying: error
                ))
            } catch {
                if Task.isCancelled { throw CancellationError() }
                throw TrellisError.connectionFailed(ConnectionFailure(
                    host: host,
                    reason: "the WebSocket connection was lost (\(error))",
                    underlying: error
                ))
            }
            guard let frame else { return nil }
            switch frame.opcode {
            case .text, .binary:
                pending = (frame.opcode, frame.unmaskedData)
            case .continuation:
                var data = frame.unmaskedData
                pending?.buffer.writeBuffer(&data)
            case .connectionClose:
                // The control handler has recorded it (``WebSocketLink/peerClosure``).
                return nil
            default:
                continue
            }
            guard let message = pending else { continue }
            if message.buffer.readableBytes > maximumSize {
                throw refusal(.messageTooBig, "a message of more than \(maximumSize) bytes (WebSocketSettings.maximumMessageSize)")
            }
            guard frame.fin else { continue }
            if message.opcode == .text {
                guard let text = String(validating: message.buffer.readableBytesView, as: UTF8.self) else {
                    throw refusal(.invalidPayload, "the server sent a text message that is not UTF-8")
                }
                return .text(text)
            }
            return .binary(Data(buffer: message.buffer, byteTransferStrategy: .noCopy))
        }
    }
}

extension WebSocketClosure {
    /// The code and reason of a close frame.
    init(_ frame: WebSocketFrame) {
        var data = frame.unmaskedData
        let code = data.readInteger(as: UInt16.self).map(WebSocketCloseCode.init(rawValue:))
        self.init(code: code, reason: data.readString(length: data.readableBytes) ?? "")
    }
}

extension TrellisError {
    /// A lost connection or a missed pong: what reconnection is for.
    var isConnectionLoss: Bool {
        if case .connectionFailed = self { return true }
        return false
    }
}
