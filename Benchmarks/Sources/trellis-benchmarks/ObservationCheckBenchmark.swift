import CoreMetrics
import Foundation
import Tracing

/// What a call costs when nothing is bootstrapped: `ObservationStage` looks at the process's
/// instrument and metrics factory (both no-ops here) and passes itself over. Timed here over
/// many checks, since one is far below the noise of a call: on one thread, and on as many
/// threads as there are cores, all checking at once, as calls made side by side do. Each
/// lookup takes a reader-writer lock, and threads taking one lock at once pass its cache line
/// between them, so the second figure is the one that counts for concurrent calls.
enum ObservationCheckBenchmark {
    static let checks = 2_000_000

    static func run() -> String {
        let alone = nanosecondsPerCheck(threads: 1)
        let threads = max(ProcessInfo.processInfo.activeProcessorCount, 2)
        let together = nanosecondsPerCheck(threads: threads)
        return String(
            format: "nothing bootstrapped: %.0f ns per call for the observation check on one thread, %.0f ns with %d threads checking at once (%d checks each)",
            alone, together, threads, checks
        )
    }

    /// The same lookups as `Client.Configuration.Observability`'s `activeTracer` and
    /// `activeMetricsFactory` when neither is set on the client.
    @inline(never)
    static func isListening() -> Bool {
        ObjectIdentifier(type(of: InstrumentationSystem.instrument)) != ObjectIdentifier(NoOpInstrument.self)
            || ObjectIdentifier(type(of: MetricsSystem.factory)) != ObjectIdentifier(NOOPMetricsHandler.self)
    }

    /// Nanoseconds per check on each of `threads` threads started together; the slowest
    /// thread's time counts.
    private static func nanosecondsPerCheck(threads: Int) -> Double {
        let start = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        let results = Results(count: threads)
        for index in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                start.wait()
                var listening = 0
                let elapsed = ContinuousClock().measure {
                    for _ in 0..<checks where isListening() { listening += 1 }
                }
                precondition(listening == 0, "something is bootstrapped: the figure would not be the passed-over check")
                results.set(index, elapsed)
                done.leave()
            }
        }
        for _ in 0..<threads { start.signal() }
        done.wait()
        let slowest = results.all.max() ?? .zero
        let nanoseconds = Double(slowest.components.attoseconds) / 1e9 + Double(slowest.components.seconds) * 1e9
        return nanoseconds / Double(checks)
    }

    private final class Results: @unchecked Sendable {
        // Each thread writes its own slot once, and all are read after the group is done.
        private var durations: [Duration]
        private let lock = NSLock()

        init(count: Int) { durations = Array(repeating: .zero, count: count) }

        func set(_ index: Int, _ duration: Duration) { lock.withLock { durations[index] = duration } }
        var all: [Duration] { lock.withLock { durations } }
    }
}
