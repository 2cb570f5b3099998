public import Foundation
import NIOConcurrencyHelpers

/// An event monitor that records a client's traffic as HAR, so that you can open a session
/// in a browser's network panel, Charles or Proxyman: one line turns it on.
///
/// ```swift
/// let client = Client(baseURL: URL(string: "https://api.example.com")!) {
///     $0.observability.eventMonitors.append(HTTPArchiveMonitor(writingTo: URL(fileURLWithPath: "session.har")))
/// }
/// ```
///
/// Each hop the client sends over the network is an entry (a response from the HTTP cache
/// is not), with its request as sent, its response as received and its timings, redacted as
/// the client's logs are (see ``HTTPArchive/Redaction``). The file is rewritten in the
/// background half a second after entries end, at most twice a second; ``write()`` writes it
/// at once, as a program does before it exits. The monitor keeps the newest `maximumEntries`
/// entries and `maximumBodySize` bytes of each body in memory.
public struct HTTPArchiveMonitor: ClientEventMonitor {
    /// The entries recorded so far.
    public let recorder: HTTPArchiveRecorder
    /// The HAR file the monitor writes, if any.
    public let file: URL?
    private let writer: ArchiveFileWriter?

    /// A monitor that keeps its entries in ``recorder`` and writes no file.
    public init(maximumEntries: Int = 1000, maximumBodySize: Int = 1 << 20, redaction: HTTPArchive.Redaction = .init()) {
        self.recorder = HTTPArchiveRecorder(maximumEntries: maximumEntries, maximumBodySize: maximumBodySize, redaction: redaction)
        self.file = nil
        self.writer = nil
    }

    /// A monitor that keeps the HAR file at `file` up to date as entries end.
    public init(writingTo file: URL, maximumEntries: Int = 1000, maximumBodySize: Int = 1 << 20, redaction: HTTPArchive.Redaction = .init()) {
        let writer = ArchiveFileWriter(file: file)
        self.recorder = HTTPArchiveRecorder(
            maximumEntries: maximumEntries,
            maximumBodySize: maximumBodySize,
            redaction: redaction,
            entryAdded: { [weak writer] recorder in writer?.schedule(recorder) }
        )
        self.file = file
        self.writer = writer
    }

    /// Writes the entries recorded so far to ``file`` now, after any write in progress.
    ///
    /// - Throws: the error of this write, or of the last background write if it failed.
    public func write() throws {
        try writer?.writeNow(recorder)
    }
}

/// Rewrites a HAR file on a queue of its own: a write is scheduled half a second after an
/// entry ends, unless one is already waiting, so a busy client rewrites the file at most twice
/// a second and never queues more than one write.
final class ArchiveFileWriter: Sendable {
    private let file: URL
    private let queue = DispatchQueue(label: "Trellis.HTTPArchiveMonitor")
    private struct State {
        var scheduled = false
        /// Whether entries have ended since the last write.
        var unwritten = false
        var failure: (any Error)?
    }
    private let state = NIOLockedValueBox(State())

    init(file: URL) {
        self.file = file
    }

    func schedule(_ recorder: HTTPArchiveRecorder) {
        let alreadyScheduled = state.withLockedValue { state in
            defer {
                state.scheduled = true
                state.unwritten = true
            }
            return state.scheduled
        }
        guard !alreadyScheduled else { return }
        queue.asyncAfter(deadline: .now() + .milliseconds(500)) { [self] in
            // A write asked for since (``writeNow(_:)``) may have written these entries.
            let unwritten = state.withLockedValue { state in
                defer {
                    state.scheduled = false
                    state.unwritten = false
                }
                return state.unwritten
            }
            guard unwritten else { return }
            do {
                try recorder.write(to: file)
            } catch {
                state.withLockedValue { $0.failure = error }
            }
        }
    }

    func writeNow(_ recorder: HTTPArchiveRecorder) throws {
        try queue.sync {
            let failure = state.withLockedValue { state in
                defer {
                    state.failure = nil
                    state.unwritten = false
                }
                return state.failure
            }
            if let failure { throw failure }
            try recorder.write(to: file)
        }
    }
}
