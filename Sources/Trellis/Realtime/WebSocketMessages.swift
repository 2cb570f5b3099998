import Foundation
import NIOConcurrencyHelpers
import NIOCore

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
