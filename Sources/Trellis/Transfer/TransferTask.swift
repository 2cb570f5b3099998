import NIOConcurrencyHelpers

/// A transfer that can be started, watched, awaited and cancelled: Yggdrasil's task values.
///
/// A task starts when its ``value`` or ``result`` is first awaited, or when ``start()`` is
/// called, so a batch (`awaitAll(maxConcurrency:)` on a sequence of tasks) can decide how many run
/// at once. It runs once; awaiting it again returns the same outcome.
///
/// ```swift
/// let task = client.downloadTask(for: request, to: destination)
/// Task { for await progress in task.progress { bar.update(progress) } }
/// let file = try await task.value
/// ```
public struct TransferTask<Success: Sendable>: Sendable {
    private final class Runner: Sendable {
        let operation: @Sendable (ProgressReporter) async throws -> Success
        let reporter = ProgressReporter()
        let task = NIOLockedValueBox<Task<Success, any Error>?>(nil)

        init(_ operation: @escaping @Sendable (ProgressReporter) async throws -> Success) {
            self.operation = operation
        }

        func start() -> Task<Success, any Error> {
            task.withLockedValue { task in
                if let task { return task }
                let started = Task { [operation, reporter] in
                    defer { reporter.finish() }
                    return try await operation(reporter)
                }
                task = started
                return started
            }
        }
    }

    private let runner: Runner
    let resumeState: ResumeState?

    init(resumeState: ResumeState? = nil, _ operation: @escaping @Sendable (ProgressReporter) async throws -> Success) {
        self.runner = Runner(operation)
        self.resumeState = resumeState
    }

    /// The transfer's progress, from its start to its end.
    public var progress: TransferProgressUpdates { TransferProgressUpdates(reporter: runner.reporter) }

    /// Starts the transfer if it has not started yet.
    public func start() {
        _ = runner.start()
    }

    /// The transfer's outcome, starting it if needed. Cancelling the awaiting task cancels
    /// the transfer.
    public var value: Success {
        get async throws {
            let task = runner.start()
            return try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        }
    }

    /// The transfer's outcome as a `Result`, starting it if needed.
    public var result: Result<Success, any Error> {
        get async {
            do {
                return .success(try await value)
            } catch {
                return .failure(error)
            }
        }
    }

    /// Stops the transfer; its ``value`` throws `CancellationError`. A task cancelled before it
    /// started never sends anything.
    public func cancel() {
        runner.task.withLockedValue { task in
            if task == nil {
                task = Task { throw CancellationError() }
                runner.reporter.finish()
            }
            task?.cancel()
        }
    }
}

/// A download: its value is the finished file. After a failure or cancellation,
/// ``TransferTask/resumeData`` says how to carry on from the bytes already on disk.
public typealias DownloadTask = TransferTask<DownloadedFile>
/// An upload of bytes or a file, whose value is the decoded response.
public typealias UploadTask<Value: Sendable> = TransferTask<Value>
/// An upload of a ``MultipartForm``, whose value is the decoded response.
public typealias MultipartUploadTask<Value: Sendable> = TransferTask<Value>
/// A request whose response body is read into memory and decoded, with download progress.
public typealias DataTask<Value: Sendable> = TransferTask<Value>

extension TransferTask where Success == DownloadedFile {
    /// What a new download needs to continue from the bytes already on disk, once this one has
    /// failed or been cancelled: read it after ``value`` has thrown (or ``result`` is a
    /// failure). `nil` while the download runs, after it succeeds, or when the server gave no
    /// validator (`ETag` or `Last-Modified`) that would make resuming safe.
    public var resumeData: ResumeData? {
        resumeState?.data
    }
}

/// Where a download's resume data is left for its task.
final class ResumeState: Sendable {
    private let box = NIOLockedValueBox<ResumeData?>(nil)

    var data: ResumeData? {
        get { box.withLockedValue { $0 } }
        set { box.withLockedValue { $0 = newValue } }
    }
}

// MARK: Batches

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
