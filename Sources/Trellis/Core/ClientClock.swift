public import Foundation

/// The time a client reads and waits on: retries' waits, the circuit breaker's cool-down, the
/// shared pause, the concurrency limit's longest wait, hedging's delay, the cache's ages and
/// its cookies' lifetimes.
///
/// A client has one, ``Client/Configuration-swift.struct/clock`` (``SystemClock`` unless you
/// set it). A test gives `TrellisTesting`'s `ManualClock` instead, and drives a breaker through
/// its cool-down, a `Retry-After: 30` pause or a hedge's delay by moving the clock, in
/// milliseconds of real time (<doc:TestingYourCode>). Timeouts are the transport's and keep
/// real time.
public protocol ClientClock: Sendable {
    /// The date now, for the times HTTP speaks in (`Retry-After` dates, rate-limit resets,
    /// a stored response's age) and the times Trellis reports (when an open circuit is tried
    /// again).
    var now: Date { get }
    /// A monotonic reading, for spans of time (a cool-down, a pause) that a change of the
    /// wall clock must not stretch or cut.
    var instant: ContinuousClock.Instant { get }
    /// Returns once `duration` of this clock's time has passed; throws `CancellationError` at
    /// once when the calling task is cancelled.
    func sleep(for duration: Duration) async throws
    /// Returns once `duration` of this clock's time has passed, or as soon as the calling task
    /// is cancelled, without throwing. For the short waits many calls make at once and mostly
    /// call off (a hedge's delay): ``SystemClock`` keeps them on one event-loop timer, where a
    /// sleep each would set and cancel a timer each. By default, ``sleep(for:)``, whose
    /// cancellation ends the wait.
    func wait(for duration: Duration) async
}

extension ClientClock {
    public func wait(for duration: Duration) async {
        try? await sleep(for: duration)
    }
}

/// The machine's clocks: `Date()` for dates, the continuous clock for spans and waits.
public struct SystemClock: ClientClock {
    /// The waits of ``wait(for:)``, on one timer for every call that uses this clock (a client's).
    private let waits = TimerWaits()

    /// The system's clock.
    public init() {}

    public var now: Date { Date() }

    public var instant: ContinuousClock.Instant { .now }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }

    public func wait(for duration: Duration) async {
        await waits.wait(for: duration)
    }
}
