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
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
        // Whichever ends first takes the continuation.
        let pending = NIOLockedValueBox<CheckedContinuation<Value, any Error>?>(continuation)
        let take: @Sendable () -> CheckedContinuation<Value, any Error>? = { pending.withLockedValue { waiting in
            defer { waiting = nil }
            return waiting
        } }
        let timer = NIOLockedValueBox<Task<Void, Never>?>(nil)
        let work = Task {
            let result: Result<Value, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            timer.withLockedValue { $0 }?.cancel()
            take()?.resume(with: result)
        }
        timer.withLockedValue { timer in
            timer = Task {
                try? await clock.sleep(for: limit)
                guard !Task.isCancelled, let waiting = take() else { return }
                work.cancel()
                waiting.resume(throwing: SharedStateTimeout(limit: limit))
            }
        }
    }
}

/// A shared store did not answer within its time limit.
package struct SharedStateTimeout: Error, CustomStringConvertible {
    package let limit: Duration
    package var description: String { "no answer within \(limit)" }
}
