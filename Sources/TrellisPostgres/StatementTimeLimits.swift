#if Postgres
import NIOConcurrencyHelpers
import Trellis

/// Runs a transaction whose steps each have a time limit of their own (or none), in a task of
/// its own that is cancelled at a limit and not waited for.
///
/// postgres-nio 1.33.2 writes each statement to its channel without a promise: one written
/// just after the connection closed (the database stopped, or dropped it) is never answered,
/// and its caller does not hear of cancellation either. A task group racing a timer would wait
/// for that statement for ever after the timer won. Here the caller is answered at the limit,
/// and the abandoned task ends whenever postgres-nio lets it.
final class StatementTimeLimits: Sendable {
    private struct State {
        /// What the operation is doing, named in the timeout.
        var step: String
        /// When the step runs out; `nil` for a step held to limits of its own (the refresh).
        var deadline: ContinuousClock.Instant?
        var limit: Duration?
        /// The setting, or settings, that give the limit, as the user names them.
        var setting: String
        /// Whether the caller has been answered with a timeout: no step starts after that (the
        /// refresh least of all, which a late transaction would otherwise make a second time).
        var gaveUp = false
    }

    private let state: NIOLockedValueBox<State>
    private let clock: any ClientClock

    private init(step: String, limit: Duration, setting: String, clock: any ClientClock) {
        self.clock = clock
        state = NIOLockedValueBox(State(step: step, deadline: clock.instant + limit, limit: limit, setting: setting))
    }

    /// Starts `step` with `limit` (`nil`: no limit of ours) from now, which `setting` gives.
    ///
    /// - Throws: `CancellationError` when the caller has already been told that the step
    ///   before ran out; the operation then goes no further.
    func next(_ step: String, limit: Duration?, setting: String = "timeLimit") throws {
        let now = clock.instant
        try state.withLockedValue { state in
            if state.gaveUp { throw CancellationError() }
            state = State(step: step, deadline: limit.map { now + $0 }, limit: limit, setting: setting)
        }
    }

    /// `operation`'s result, or ``PostgresStorageTimeout`` naming the step that ran out. The
    /// first step is `first`, held to `limit`; `operation` moves on with ``next(_:limit:)``.
    /// While a step has no limit, the watch looks again every `limit`.
    static func run<Value: Sendable>(
        first: String,
        limit: Duration,
        setting: String = "timeLimit",
        on clock: any ClientClock = SystemClock(),
        _ operation: @escaping @Sendable (StatementTimeLimits) async throws -> Value
    ) async throws -> Value {
        let limits = StatementTimeLimits(step: first, limit: limit, setting: setting, clock: clock)
        return try await withWatch({ try await operation(limits) }) {
            while !Task.isCancelled {
                let now = clock.instant
                // Decided under the lock that `next` takes, so a step either starts before the
                // watch gives up (and the watch sees it) or not at all.
                let (verdict, deadline) = limits.state.withLockedValue { state -> (PostgresStorageTimeout?, ContinuousClock.Instant?) in
                    guard let deadline = state.deadline, let stepLimit = state.limit, now >= deadline else { return (nil, state.deadline) }
                    state.gaveUp = true
                    return (PostgresStorageTimeout(step: state.step, limit: stepLimit, setting: state.setting), deadline)
                }
                if let verdict { return verdict }
                try? await clock.sleep(for: deadline.map { now.duration(to: $0) } ?? limit)
            }
            return nil
        }
    }
}

/// A step of a storage's work in PostgreSQL that did not end within its time limit.
struct PostgresStorageTimeout: Error, CustomStringConvertible {
    let step: String
    let limit: Duration
    /// The setting, or settings, that give the limit.
    let setting: String
    var description: String { "no \(step) within \(limit) (\(setting))" }
}
#endif
