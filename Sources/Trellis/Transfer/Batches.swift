// Batches of transfer tasks (the Transfers article, "Batches"): Yggdrasil's `awaitAll()`, bounded.

extension Sequence where Element: Sendable {
    /// Runs every task, at most `maxConcurrency` at a time, and returns their values in order.
    /// The first failure cancels the tasks still running or waiting and is thrown.
    public func awaitAll<Value: Sendable>(maxConcurrency: Int = 4) async throws -> [Value]
    where Element == TransferTask<Value> {
        let outcome = await runBounded(Array(self), maxConcurrency: maxConcurrency, stoppingAtFailure: true)
        if let failure = outcome.firstFailure { throw failure }
        return outcome.results.compactMap { try? $0?.get() }
    }

    /// Runs every task, at most `maxConcurrency` at a time, and returns each outcome in order;
    /// one failure does not stop the others.
    public func awaitAllResults<Value: Sendable>(maxConcurrency: Int = 4) async -> [Result<Value, any Error>]
    where Element == TransferTask<Value> {
        let outcome = await runBounded(Array(self), maxConcurrency: maxConcurrency, stoppingAtFailure: false)
        return outcome.results.map { $0 ?? .failure(CancellationError()) }
    }

    /// Starts the tasks in order, a new one as each finishes, with at most `maxConcurrency`
    /// running. With `stoppingAtFailure`, the first failure cancels the rest and is returned.
    private func runBounded<Value: Sendable>(
        _ tasks: [TransferTask<Value>],
        maxConcurrency: Int,
        stoppingAtFailure: Bool
    ) async -> (results: [Result<Value, any Error>?], firstFailure: (any Error)?) {
        var results = [Result<Value, any Error>?](repeating: nil, count: tasks.count)
        var firstFailure: (any Error)?
        await withTaskGroup(of: (Int, Result<Value, any Error>).self) { group in
            var next = 0
            func startNext() {
                guard next < tasks.count else { return }
                let index = next
                let task = tasks[index]
                next += 1
                group.addTask { (index, await task.result) }
            }
            for _ in 0..<Swift.max(1, maxConcurrency) { startNext() }
            while let (index, result) = await group.next() {
                results[index] = result
                if stoppingAtFailure, case .failure(let error) = result {
                    firstFailure = error
                    group.cancelAll()
                    for task in tasks { task.cancel() }
                    break
                }
                startNext()
            }
        }
        return (results, firstFailure)
    }

    /// Runs every task at once and returns the value of the first to succeed, cancelling the
    /// rest; if every task fails, throws the last failure.
    public func awaitFirst<Value: Sendable>() async throws -> Value where Element == TransferTask<Value> {
        let tasks = Array(self)
        guard !tasks.isEmpty else {
            throw TrellisError.invalidRequest(InvalidRequest(.body, "awaitFirst() needs at least one task"))
        }
        return try await withThrowingTaskGroup(of: Value?.self) { group in
            for task in tasks {
                group.addTask {
                    // A failure is remembered, not thrown, so that one failing task does not
                    // end the race while another may still succeed.
                    switch await task.result {
                    case .success(let value): return value
                    case .failure(let error): throw FailedEntrant(error: error)
                    }
                }
            }
            var lastError: any Error = CancellationError()
            while true {
                do {
                    guard let finished = try await group.next() else { break }
                    if let value = finished {
                        group.cancelAll()
                        for task in tasks { task.cancel() }
                        return value
                    }
                } catch let failed as FailedEntrant {
                    lastError = failed.error
                }
            }
            throw lastError
        }
    }
}

private struct FailedEntrant: Error {
    let error: any Error
}
