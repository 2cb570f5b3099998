import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Runs an operation against a time limit.
enum Deadline {
    /// The operation's result, or ``TrellisError/timedOut(_:)`` once `limit` has passed; the
    /// operation is cancelled then, which makes the transport close the connection.
    ///
    /// The operation runs in a task of its own so that expiry cancels it alone, never the
    /// caller's task. The timer is an event-loop timer rather than a second task sleeping: a
    /// task per request costs allocations and a thread hop, and this runs for every buffered
    /// call (measured in `Benchmarks/`).
    ///
    /// - Parameter reported: the timeout the error names (the request's), when `limit` is what
    ///   is left of it.
    static func run<Value: Sendable>(
        _ limit: Duration,
        reporting reported: Duration? = nil,
        describing request: Request,
        _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let task = Task { try await operation() }
        let expired = NIOLockedValueBox(false)
        let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(limit)) {
            expired.withLockedValue { $0 = true }
            task.cancel()
        }
        defer { timer.cancel() }
        let timedOut = { TrellisError.timedOut(TimeoutFailure(timeout: reported ?? limit, request: RequestLog.summary(request))) }
        let value: Value
        do {
            value = try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        } catch {
            if expired.withLockedValue({ $0 }) { throw timedOut() }
            throw error
        }
        // A sequence may end quietly rather than throw when its task is cancelled: what it
        // gave by then is cut short, not a whole answer.
        if expired.withLockedValue({ $0 }) { throw timedOut() }
        return value
    }
}
