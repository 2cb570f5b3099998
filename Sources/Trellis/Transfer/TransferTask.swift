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
