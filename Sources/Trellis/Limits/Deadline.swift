import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Runs an operation against a time limit.
enum Deadline {
    /// The operation's result, or ``TrellisError/timedOut(_:)`` (naming the limits' timeout)
    /// once the limits' deadline has passed; the operation is cancelled then, which makes the
    /// transport close the connection.
    ///
    /// The operation runs in a task of its own so that expiry cancels it alone, never the
    /// caller's task. The task starts on the calling thread and runs there until it first has
    /// to wait, so an operation whose input is already at hand (a small body that came with
    /// its head) completes without a thread hop. The timer is an event-loop timer rather than a
    /// second task sleeping, which would cost allocations and a thread hop on every buffered
    /// call.
    static func run<Value: Sendable>(
        until limits: ExchangeLimits,
        describing request: Request,
        _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let limit = limits.deadline - .now
        let timedOut = { limits.timedOut(request) }
        guard limit > .zero else { throw timedOut() }
        let watch = Watch()
        let task = Task.immediate {
            defer { watch.finish() }
            return try await operation()
        }
        // An operation that finished on the calling thread needs no timer.
        let timer = watch.arm {
            MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(limit)) {
                if watch.expire() { task.cancel() }
            }
        }
        defer { timer?.cancel() }
        let value: Value
        do {
            value = try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        } catch {
            if watch.hasExpired { throw timedOut() }
            throw error
        }
        // A sequence may end quietly rather than throw when its task is cancelled: what it
        // gave by then is cut short, not a whole answer.
        if watch.hasExpired { throw timedOut() }
        return value
    }

    /// Whether the operation finished or the time ran out first.
    private final class Watch: Sendable {
        private enum State { case running, finished, expired }
        private let state = NIOLockedValueBox(State.running)

        func finish() {
            state.withLockedValue { if $0 == .running { $0 = .finished } }
        }

        /// Whether this call marked the time as out (the operation had not finished).
        func expire() -> Bool {
            state.withLockedValue { state in
                guard state == .running else { return false }
                state = .expired
                return true
            }
        }

        var hasExpired: Bool { state.withLockedValue { $0 == .expired } }

        /// `schedule()`'s timer, unless the operation has finished already.
        func arm(_ schedule: () -> Scheduled<Void>) -> Scheduled<Void>? {
            state.withLockedValue { $0 == .running } ? schedule() : nil
        }
    }
}
