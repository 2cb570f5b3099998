#if Postgres
import NIOConcurrencyHelpers

/// A lock held by a task of its own for a caller: the holder says when it has connected and
/// when it has the lock, then holds it until the caller releases it; the caller waits for the
/// lock, or for the holder's failure, or gives up on a holder that has not connected in time.
final class LockLease: Sendable {
    enum Outcome: Sendable {
        case taken
        case failed(String)
    }

    private struct State {
        var connected = false
        var outcome: Outcome?
        var waiter: CheckedContinuation<Outcome, Never>?
        var released = false
        var holder: CheckedContinuation<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    /// The holder has a connection: the time limit is over, the wait for the lock begins.
    func connected() {
        state.withLockedValue { $0.connected = true }
    }

    /// The caller's outcome, the first one given.
    func resolve(_ outcome: Outcome) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Outcome, Never>? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    /// Fails the lease when the holder has no connection yet.
    func giveUpUnlessConnected(after limit: Duration) {
        guard !state.withLockedValue({ $0.connected }) else { return }
        resolve(.failed("no connection within \(limit)"))
    }

    /// Fails the lease when the holder has not taken the lock yet: a statement postgres-nio
    /// never answers (see `StatementTimeLimits`) would otherwise hold the caller.
    func giveUpUnlessTaken(after limit: Duration) {
        resolve(.failed("the lock was not taken within \(limit)"))
    }

    /// For the holder, once it has the lock: tells the caller, and returns when the caller
    /// releases it.
    func holdUntilReleased() async {
        resolve(.taken)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let released = state.withLockedValue { state in
                if !state.released { state.holder = continuation }
                return state.released
            }
            if released { continuation.resume() }
        }
    }

    /// For the caller: waits until the lock is taken or the lease has failed.
    func outcome() async -> Outcome {
        await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let known = state.withLockedValue { state -> Outcome? in
                if state.outcome == nil { state.waiter = continuation }
                return state.outcome
            }
            if let known { continuation.resume(returning: known) }
        }
    }

    /// For the caller, when its work is done: lets the holder end its transaction.
    func release() {
        let holder = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            state.released = true
            defer { state.holder = nil }
            return state.holder
        }
        holder?.resume()
    }
}
#endif
