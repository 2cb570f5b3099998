import Foundation

/// One origin's circuit: closed (counting failures), open until a time, or half open while
/// its probe calls are out.
struct CircuitState: OriginState {
    enum Phase: Equatable {
        case closed
        /// `retryAt` is `until` as a date, for refusals and events, worked out once when the
        /// circuit opened: a refusal reads no clock but the one it must. With the clock read
        /// only when needed, it took refusals from 2.03 to 1.70 µs (5 alternated runs of
        /// `TRELLIS_BENCH_PROFILE=refusals trellis-benchmarks resilience`).
        case open(until: ContinuousClock.Instant, retryAt: Date, detail: String)
        case halfOpen(probesInFlight: Int, probesAnswered: Int)
    }

    /// What the breaker lets an attempt do.
    enum Admission {
        /// Go, as any call while the circuit is closed.
        case pass
        /// Go as a probe; `halfOpened` when this call's arrival ended the cool-down.
        case probe(halfOpened: Bool)
        /// Fail at once.
        case refuse(CallRefusal.Reason, retryAt: Date?, detail: String)
    }

    /// A change of state an attempt's outcome caused.
    enum Change {
        case opened(until: Date, detail: String)
        case closed
    }

    private(set) var phase = Phase.closed
    private var consecutiveFailures = 0
    private var recent = RecentOutcomes()

    init(_ breaker: CircuitBreaker) {}

    func isIdle(_ breaker: CircuitBreaker, at now: ContinuousClock.Instant) -> Bool {
        phase == .closed && consecutiveFailures == 0 && recent.isEmpty
    }

    /// `now` is read only when the circuit is not closed: a closed one, the usual, costs no
    /// clock reading.
    mutating func admit(at now: @autoclosure () -> ContinuousClock.Instant, _ breaker: CircuitBreaker) -> Admission {
        switch phase {
        case .closed:
            return .pass
        case .open(let until, let retryAt, let detail):
            guard now() >= until else { return .refuse(.circuitOpen, retryAt: retryAt, detail: detail) }
            phase = .halfOpen(probesInFlight: 1, probesAnswered: 0)
            return .probe(halfOpened: true)
        case .halfOpen(let inFlight, let answered):
            guard inFlight + answered < breaker.probes else { return .refuse(.circuitProbing, retryAt: nil, detail: "") }
            phase = .halfOpen(probesInFlight: inFlight + 1, probesAnswered: answered)
            return .probe(halfOpened: false)
        }
    }

    /// Records an attempt's outcome: `failed`, or answered (`false`); `probe` when
    /// ``admit(at:_:)`` let it go as one. `clock` is read only when the outcome is counted in a
    /// window or opens the circuit.
    mutating func record(failed: Bool, probe: Bool, clock: any ClientClock, _ breaker: CircuitBreaker) -> Change? {
        if probe {
            // An outcome of a probe of an earlier half-open spell (the circuit opened again
            // meanwhile) has nothing left to decide.
            guard case .halfOpen(let inFlight, let answered) = phase else { return nil }
            if failed { return open(clock, breaker, detail: "a probe call failed") }
            guard answered + 1 >= breaker.probes else {
                phase = .halfOpen(probesInFlight: inFlight - 1, probesAnswered: answered + 1)
                return nil
            }
            phase = .closed
            consecutiveFailures = 0
            recent = RecentOutcomes()
            return .closed
        }
        // Outcomes of calls that started before the circuit opened decide nothing.
        guard case .closed = phase else { return nil }
        switch breaker.trip {
        case .consecutiveFailures(let limit):
            consecutiveFailures = failed ? consecutiveFailures + 1 : 0
            if consecutiveFailures >= limit {
                return open(clock, breaker, detail: "\(consecutiveFailures) failures in a row")
            }
        case .failureRate(let rate, let minimumCalls, let window):
            let now = clock.instant
            recent.record(failed: failed, at: now, window: window)
            let (calls, failures) = recent.counts(at: now, window: window)
            if calls >= minimumCalls, Double(failures) >= rate * Double(calls) {
                return open(clock, breaker, detail: "\(failures) of the last \(calls) attempts failed within \(window)")
            }
        }
        return nil
    }

    /// A probe that ended without an outcome (its caller cancelled it): another may go.
    mutating func releaseProbe() {
        guard case .halfOpen(let inFlight, let answered) = phase else { return }
        phase = .halfOpen(probesInFlight: max(0, inFlight - 1), probesAnswered: answered)
    }

    private mutating func open(_ clock: any ClientClock, _ breaker: CircuitBreaker, detail: String) -> Change {
        let retryAt = clock.now.addingTimeInterval(breaker.coolDown.inSeconds)
        phase = .open(until: clock.instant + breaker.coolDown, retryAt: retryAt, detail: detail)
        consecutiveFailures = 0
        recent = RecentOutcomes()
        return .opened(until: retryAt, detail: detail)
    }
}

/// Attempts and failures within a sliding window, in ten slices of it, so that counting them
/// takes the same small memory however many calls are made.
struct RecentOutcomes {
    private struct Slice {
        var index: Int64 = -1
        var calls = 0
        var failures = 0
    }

    private static let sliceCount = 10
    private var slices = [Slice](repeating: Slice(), count: sliceCount)
    private var epoch: ContinuousClock.Instant?

    var isEmpty: Bool { epoch == nil }

    mutating func record(failed: Bool, at now: ContinuousClock.Instant, window: Duration) {
        if epoch == nil { epoch = now }
        let index = sliceIndex(at: now, window: window)
        let slot = Int(index % Int64(Self.sliceCount))
        if slices[slot].index != index { slices[slot] = Slice(index: index) }
        slices[slot].calls += 1
        if failed { slices[slot].failures += 1 }
    }

    func counts(at now: ContinuousClock.Instant, window: Duration) -> (calls: Int, failures: Int) {
        guard epoch != nil else { return (0, 0) }
        let current = sliceIndex(at: now, window: window)
        var calls = 0
        var failures = 0
        for slice in slices where slice.index > current - Int64(Self.sliceCount) {
            calls += slice.calls
            failures += slice.failures
        }
        return (calls, failures)
    }

    private func sliceIndex(at now: ContinuousClock.Instant, window: Duration) -> Int64 {
        guard let epoch else { return 0 }
        let slice = window / Self.sliceCount
        return Int64((now - epoch) / slice)
    }
}
