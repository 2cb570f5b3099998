import NIOConcurrencyHelpers

/// How far a transfer has come.
public struct TransferProgress: Sendable, Equatable, CustomStringConvertible {
    /// Bytes sent (upload) or received (download) so far, including bytes a resumed download
    /// already had on disk.
    public var completedBytes: Int64
    /// The total, when the length is known (`Content-Length`, a file's size).
    public var totalBytes: Int64?
    /// Whether the transfer has ended (successfully or not); the last value of every sequence.
    public var isFinished: Bool

    /// Progress of `completedBytes` out of `totalBytes` (`nil` when unknown).
    public init(completedBytes: Int64, totalBytes: Int64?, isFinished: Bool = false) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
        self.isFinished = isFinished
    }

    /// `completedBytes / totalBytes` between 0 and 1, or `nil` when the total is unknown. An
    /// empty transfer that has finished is complete.
    public var fractionCompleted: Double? {
        guard let totalBytes else { return isFinished ? 1 : nil }
        guard totalBytes > 0 else { return isFinished ? 1 : 0 }
        return min(1, Double(completedBytes) / Double(totalBytes))
    }

    public var description: String {
        let total = totalBytes.map { " of \($0)" } ?? ""
        let percent = fractionCompleted.map { " (\(Int(($0 * 100).rounded(.down)))%)" } ?? ""
        return "\(completedBytes)\(total) bytes\(percent)\(isFinished ? ", finished" : "")"
    }
}

/// The progress of one transfer, as an asynchronous sequence.
///
/// Each iteration starts with the latest value and then sees updates as they happen, coalesced:
/// a consumer slower than the transfer skips intermediate values instead of holding the
/// transfer back or queueing them, and the updates themselves are throttled to at most one per
/// 0.5% of the total (or per 256 KiB when the total is unknown). The sequence ends with a
/// value whose ``TransferProgress/isFinished`` is `true`. Any number of consumers may iterate it.
///
/// ```swift
/// for await progress in task.progress {
///     print(progress.fractionCompleted ?? 0)
/// }
/// ```
public struct TransferProgressUpdates: AsyncSequence, Sendable {
    public typealias Element = TransferProgress

    let reporter: ProgressReporter

    public func makeAsyncIterator() -> AsyncStream<TransferProgress>.Iterator {
        reporter.subscribe().makeAsyncIterator()
    }

    /// The latest value, without waiting.
    public var current: TransferProgress { reporter.current }
}

/// Collects a transfer's byte counts and hands coalesced values to its subscribers.
final class ProgressReporter: Sendable {
    private struct State {
        var progress = TransferProgress(completedBytes: 0, totalBytes: nil)
        var published: Int64 = -1
        var subscribers: [Int: AsyncStream<TransferProgress>.Continuation] = [:]
        var nextSubscriber = 0
    }

    private let state = NIOLockedValueBox(State())

    var current: TransferProgress { state.withLockedValue { $0.progress } }

    func subscribe() -> AsyncStream<TransferProgress> {
        let (stream, continuation) = AsyncStream.makeStream(of: TransferProgress.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLockedValue { state -> Int? in
            continuation.yield(state.progress)
            guard !state.progress.isFinished else { return nil }
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLockedValue { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Starts (or restarts, for a download the server would not resume) the count.
    func begin(completed: Int64, total: Int64?) {
        state.withLockedValue { state in
            state.progress.completedBytes = completed
            state.progress.totalBytes = total
            publish(&state)
        }
    }

    /// Adds bytes moved; publishes only when the step since the last value is worth showing.
    func advance(by count: Int) {
        state.withLockedValue { state in
            state.progress.completedBytes += Int64(count)
            publishIfWorthIt(&state)
        }
    }

    /// Raises the count to `completed` if it is below.
    func advance(toAtLeast completed: Int64) {
        state.withLockedValue { state in
            guard completed > state.progress.completedBytes else { return }
            state.progress.completedBytes = completed
            publishIfWorthIt(&state)
        }
    }

    private func publishIfWorthIt(_ state: inout State) {
        let step = state.progress.totalBytes.map { max($0 / 200, 1) } ?? 256 * 1024
        if state.progress.completedBytes - state.published >= step
            || state.progress.completedBytes == state.progress.totalBytes
        {
            publish(&state)
        }
    }

    /// Publishes the final value and ends every subscriber's sequence.
    func finish() {
        let subscribers = state.withLockedValue { state in
            state.progress.isFinished = true
            defer { state.subscribers = [:] }
            for continuation in state.subscribers.values { continuation.yield(state.progress) }
            return state.subscribers.values
        }
        for continuation in subscribers { continuation.finish() }
    }

    private func publish(_ state: inout State) {
        state.published = state.progress.completedBytes
        for continuation in state.subscribers.values { continuation.yield(state.progress) }
    }
}
