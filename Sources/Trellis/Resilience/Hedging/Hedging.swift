/// Hedged requests for idempotent calls: when an attempt has not answered after a delay, a
/// second one is sent, and the first answer wins; the other attempt is cancelled, which closes
/// its connection. It cuts the slow tail of a service whose answers are usually quick, at the
/// price of a few more requests.
///
/// Only idempotent methods with a body that can be sent again are hedged. Each hedge is
/// taken from the origin's ``RetryBudget`` when there is one: while the budget refuses
/// retries, no hedge is sent. An attempt that fails ends the call only when no other is
/// still out, and so does an answer that the hedging's ``failureClassifier`` or the client's
/// (``Client/Configuration-swift.struct/Resilience-swift.struct/failureClassifier``) counts as a
/// failure; with neither, every answer wins. When all fail, the call fails, or returns its
/// answer, as its first attempt did. Each hedge sent is a
/// ``ResilienceEvent/hedgeSent(origin:after:)``.
///
/// Hedges run in a task the call makes: each sees the caller's task-local values (the trace
/// context, or a request ID of your own that a middleware reads), runs at its priority, and is
/// cancelled with the call.
///
/// ```swift
/// let client = Client(baseURL: url) {
///     // A second attempt when the first is slower than 95 in 100 of the recent ones.
///     $0.resilience.hedging = Hedging(after: .percentile(0.95, initially: .milliseconds(100)))
/// }
/// ```
public struct Hedging: Sendable {
    /// How long an attempt may go unanswered before a hedge is sent.
    public enum Delay: Sendable, Equatable {
        /// Always this long.
        case fixed(Duration)
        /// The `percentile` (0.95, say) of the origin's last ``Hedging/sampleCount`` answer
        /// times, and `initially` until ten are known.
        case percentile(Double, initially: Duration)
    }

    /// How long an attempt may go unanswered before a hedge is sent.
    public var delay: Delay
    /// How many hedges one call may send, each after the delay from the previous one.
    public var maximumHedges: Int
    /// The answers that do not win while another attempt is out, in place of the client's
    /// classifier; with neither, every answer wins.
    public var failureClassifier: FailureClassifier?

    /// How many recent answer times per origin a percentile is taken from.
    public static let sampleCount = 100

    /// Hedging after `delay`, with at most `maximumHedges` (one by default) more attempts per
    /// call.
    public init(after delay: Delay, maximumHedges: Int = 1, failureClassifier: FailureClassifier? = nil) {
        switch delay {
        case .fixed(let duration): self.delay = .fixed(max(.zero, duration))
        case .percentile(let percentile, let initially):
            self.delay = .percentile(min(1, max(0, percentile)), initially: max(.zero, initially))
        }
        self.maximumHedges = max(0, maximumHedges)
        self.failureClassifier = failureClassifier
    }
}

extension Hedging: FailureCountingPolicy {
    /// None: every answer wins.
    var builtInFailures: FailureClassifier? { nil }
}

/// One origin's recent answer times, for a delay given as a percentile.
struct RecentLatencies: OriginState {
    private var samples: [Duration] = []
    private var nextSlot = 0
    /// The percentile last taken, kept until the next sample comes.
    private var cached: (percentile: Double, value: Duration)?

    init(_ hedging: Hedging) {}

    func isIdle(_ hedging: Hedging, at now: ContinuousClock.Instant) -> Bool { samples.isEmpty }

    mutating func record(_ latency: Duration) {
        if samples.count < Hedging.sampleCount {
            samples.append(latency)
        } else {
            samples[nextSlot] = latency
            nextSlot = (nextSlot + 1) % Hedging.sampleCount
        }
        cached = nil
    }

    /// The `percentile` of the samples, or `nil` before ten are known.
    mutating func value(at percentile: Double) -> Duration? {
        guard samples.count >= 10 else { return nil }
        if let cached, cached.percentile == percentile { return cached.value }
        let sorted = samples.sorted()
        // The nearest-rank percentile: the smallest sample with at least that share at or
        // below it.
        let rank = Int((Double(sorted.count) * percentile).rounded(.up))
        let value = sorted[min(sorted.count, max(1, rank)) - 1]
        cached = (percentile, value)
        return value
    }
}
