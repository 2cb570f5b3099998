#if Postgres
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Trellis

/// The fleet's advisory lock on a key, held for a caller by a transaction in a task of its own:
/// the one way the storages hold it (the token storage for a refresh, the cache storage for a
/// fetch).
///
/// The caller's work (a refresh, a fetch) runs in the caller's task, never in the
/// transaction's: postgres-nio 1.33.2 never answers a statement written just after its
/// connection closed, nor hears of its caller's cancellation, so a holder stuck so is given up
/// at its limit and not waited for, and the caller's work is not tied to it.
final class LockLease: Sendable {
    /// The lock could not be taken in time, or the holder failed: what was waited for, and for
    /// how long, or the database's error.
    struct NotTaken: Error, CustomStringConvertible {
        let description: String
        /// Whether the connection was there and the lock was held by another the whole time:
        /// a wait, not a failure of the database.
        var waitedForTheLock = false
    }

    private struct State {
        var connected = false
        var outcome: Result<Void, any Error>?
        var waiter: CheckedContinuation<Result<Void, any Error>, Never>?
        var released = false
        var holder: CheckedContinuation<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    /// Takes the lock on `key` (named `name` in errors): a connection within `timeLimit`, then
    /// the lock within `wait` (the server's `lock_timeout`; `nil`: as long as its holder holds
    /// it), and `timeLimit` beside it, both on `clock`. Release the lease when the work is done.
    ///
    /// - Throws: ``NotTaken`` naming the step that ran out, or
    ///   ``AdvisoryLock/WaitRanOut`` when the server's wait ran out, or the database's error.
    static func take(
        _ key: String,
        naming name: String,
        on client: PostgresClient,
        connectingWithin timeLimit: Duration,
        waitingAtMost wait: Duration?,
        setting: String,
        clock: any ClientClock,
        logger: Logger
    ) async throws -> LockLease {
        let lease = LockLease()
        let holder = Task {
            do {
                try await client.withTransaction(logger: logger) { connection in
                    lease.connected()
                    try await AdvisoryLock.take(key, on: connection, waitingAtMost: wait, setting: setting, logger: logger)
                    await lease.holdUntilReleased()
                }
            } catch {
                lease.resolve(.failure(AdvisoryLock.firstFailure(of: error)))
            }
        }
        let lockLimit = (wait ?? .seconds(30)) + timeLimit
        let timer = Task {
            try? await clock.sleep(for: timeLimit)
            guard !Task.isCancelled else { return }
            lease.giveUpUnlessConnected(NotTaken(description: "no connection within \(timeLimit) (timeLimit)"))
            try? await clock.sleep(for: lockLimit)
            guard !Task.isCancelled else { return }
            lease.resolve(.failure(NotTaken(
                description: "no lock on \(name) within \(lockLimit) (\(setting), and timeLimit: \(timeLimit))", waitedForTheLock: true
            )))
        }
        let outcome = await lease.outcome()
        timer.cancel()
        if case .failure(let error) = outcome {
            holder.cancel()
            lease.release()
            throw error
        }
        return lease
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

    /// The holder has a connection: the wait for the lock begins.
    private func connected() {
        state.withLockedValue { $0.connected = true }
    }

    /// The caller's outcome, the first one given.
    private func resolve(_ outcome: Result<Void, any Error>) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Result<Void, any Error>, Never>? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    /// Fails the lease when the holder has no connection yet.
    private func giveUpUnlessConnected(_ failure: NotTaken) {
        guard !state.withLockedValue({ $0.connected }) else { return }
        resolve(.failure(failure))
    }

    /// For the holder, once it has the lock: tells the caller, and returns when the caller
    /// releases it.
    private func holdUntilReleased() async {
        resolve(.success(()))
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let released = state.withLockedValue { state in
                if !state.released { state.holder = continuation }
                return state.released
            }
            if released { continuation.resume() }
        }
    }

    /// For the caller: waits until the lock is taken or the lease has failed.
    private func outcome() async -> Result<Void, any Error> {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, any Error>, Never>) in
            let known = state.withLockedValue { state -> Result<Void, any Error>? in
                if state.outcome == nil { state.waiter = continuation }
                return state.outcome
            }
            if let known { continuation.resume(returning: known) }
        }
    }
}
#endif
