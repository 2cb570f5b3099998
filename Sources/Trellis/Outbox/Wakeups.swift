import NIOConcurrencyHelpers

/// Wakes an ``Outbox``'s deliverers when a call is enqueued or revived: each waits for the
/// signal after the generation it last saw, for a time at most, so that a signal that came
/// between its look at the storage and its wait is not missed.
final class Wakeups: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    /// How many signals have been given.
    var generation: UInt64 { state.withLockedValue { $0.generation } }

    /// Wakes every waiter.
    func signal() {
        let waiters = state.withLockedValue { state in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return state.waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns at the first signal after `generation` (at once if one came already), after
    /// `limit` on `clock`, or when the task is cancelled.
    func wait(after generation: UInt64, atMost limit: Duration, on clock: any ClientClock) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.signalled(after: generation) }
            group.addTask { try? await clock.sleep(for: limit) }
            await group.next()
            group.cancelAll()
        }
    }

    private func signalled(after generation: UInt64) async {
        let id = state.withLockedValue { state in
            defer { state.nextWaiter &+= 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLockedValue { state in
                    guard state.generation == generation, !Task.isCancelled else { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
