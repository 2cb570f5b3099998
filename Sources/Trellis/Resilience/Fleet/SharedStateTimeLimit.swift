import NIOConcurrencyHelpers

/// A store's time limit: `operation`'s result, or ``SharedStateTimeout`` once `limit` has
/// passed on `clock`, whichever comes first. The operation runs in a task of its own, which is
/// cancelled at the limit and not waited for: a store that ignores cancellation cannot hold
/// the caller past its limit. (`package`: `TrellisPostgres` holds its statements to the same
/// limits.)
package func withTimeLimit<Value: Sendable>(
    _ limit: Duration,
    on clock: any ClientClock,
    _ operation: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    try await withWatch(operation) {
        try? await clock.sleep(for: limit)
        return SharedStateTimeout(limit: limit)
    }
}

/// `operation`'s result, or the error `watch` returns first. The operation runs in a task of
/// its own, which is cancelled when `watch` gives its error and not waited for; `watch` runs
/// in another, cancelled once the operation has ended (it then returns what it likes, which
/// is not used).
package func withWatch<Value: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Value,
    watch: @escaping @Sendable () async -> (any Error)?
) async throws -> Value {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
        // Whichever ends first takes the continuation.
        let pending = NIOLockedValueBox<CheckedContinuation<Value, any Error>?>(continuation)
        let take: @Sendable () -> CheckedContinuation<Value, any Error>? = { pending.withLockedValue { waiting in
            defer { waiting = nil }
            return waiting
        } }
        let watcher = NIOLockedValueBox<Task<Void, Never>?>(nil)
        let work = Task {
            let result: Result<Value, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            watcher.withLockedValue { $0 }?.cancel()
            take()?.resume(with: result)
        }
        watcher.withLockedValue { watcher in
            watcher = Task {
                let verdict = await watch()
                guard !Task.isCancelled, let verdict, let waiting = take() else { return }
                work.cancel()
                waiting.resume(throwing: verdict)
            }
        }
    }
}

/// A shared store did not answer within its time limit.
package struct SharedStateTimeout: Error, CustomStringConvertible {
    package let limit: Duration
    package var description: String { "no answer within \(limit)" }
}
