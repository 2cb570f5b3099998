import NIOConcurrencyHelpers

/// What a client's resilience policies keep about one origin, together: its retry tokens,
/// circuit, attempts in flight, pause and recent answer times, for the policies that are on.
///
/// ``RetryStage`` looks the record of a call's origin up once and passes it on in
/// ``CallContext/originRecord``; every policy's stage then works on it under its one lock,
/// without hashing the origin again.
final class OriginRecord: Sendable {
    /// Each policy's state; `nil` for a policy that is off.
    struct States {
        var budget: RetryTokens?
        var circuit: CircuitState?
        var slots: ConcurrencySlots?
        var pause: BackoffPause?
        var latencies: RecentLatencies?

        init(_ settings: Client.Configuration.Resilience) {
            budget = settings.retryBudget.map(RetryTokens.init)
            circuit = settings.circuitBreaker.map(CircuitState.init)
            slots = settings.concurrencyLimit.map(ConcurrencySlots.init)
            pause = settings.sharedBackoff.map(BackoffPause.init)
            latencies = settings.hedging.map(RecentLatencies.init)
        }

        /// Whether every policy's state is no different from a new one's at `now`.
        func isIdle(_ settings: Client.Configuration.Resilience, at now: ContinuousClock.Instant) -> Bool {
            func idle<State: OriginState>(_ state: State?, _ settings: State.Settings?) -> Bool {
                guard let state, let settings else { return true }
                return state.isIdle(settings, at: now)
            }
            return idle(budget, settings.retryBudget) && idle(circuit, settings.circuitBreaker)
                && idle(slots, settings.concurrencyLimit) && idle(pause, settings.sharedBackoff)
                && idle(latencies, settings.hedging)
        }
    }

    let origin: String
    private let states: NIOLockedValueBox<States>

    init(origin: String, _ settings: Client.Configuration.Resilience) {
        self.origin = origin
        states = NIOLockedValueBox(States(settings))
    }

    // One accessor per policy. Each is called only by the stage of a policy that is on, whose
    // state every record of the client holds.

    func budget<Result>(_ body: (inout RetryTokens) -> Result) -> Result {
        states.withLockedValue { body(&$0.budget!) }
    }

    func circuit<Result>(_ body: (inout CircuitState) -> Result) -> Result {
        states.withLockedValue { body(&$0.circuit!) }
    }

    func slots<Result>(_ body: (inout ConcurrencySlots) -> Result) -> Result {
        states.withLockedValue { body(&$0.slots!) }
    }

    func pause<Result>(_ body: (inout BackoffPause) -> Result) -> Result {
        states.withLockedValue { body(&$0.pause!) }
    }

    func latencies<Result>(_ body: (inout RecentLatencies) -> Result) -> Result {
        states.withLockedValue { body(&$0.latencies!) }
    }

    func isIdle(_ settings: Client.Configuration.Resilience, at now: ContinuousClock.Instant) -> Bool {
        states.withLockedValue { $0.isIdle(settings, at: now) }
    }
}

/// The record of every origin a client calls (``OriginRecord``), behind one lock.
///
/// The table holds at most ``capacity`` origins that are not idle: when it is full, idle ones
/// are forgotten first, so a client that calls endless origins does not keep them all. An
/// origin with calls in flight under a concurrency limit is never idle, so the table only
/// outgrows its capacity by what is in flight.
final class OriginRecords: Sendable {
    let settings: Client.Configuration.Resilience
    /// The client's clock, for the states that keep time.
    private let clock: any ClientClock
    private let records = NIOLockedValueBox<[String: OriginRecord]>([:])

    static var capacity: Int { 1024 }

    /// A table for `settings`, or `nil` when no policy that keeps a record per origin is on.
    init?(_ settings: Client.Configuration.Resilience, clock: any ClientClock) {
        guard settings.retryBudget != nil || settings.circuitBreaker != nil || settings.concurrencyLimit != nil
            || settings.sharedBackoff != nil || settings.hedging != nil
        else { return nil }
        self.settings = settings
        self.clock = clock
    }

    /// The record of `origin`, made if there is none.
    func record(for origin: String) -> OriginRecord {
        records.withLockedValue { records in
            if let record = records[origin] { return record }
            if records.count >= Self.capacity {
                let now = clock.instant
                records = records.filter { !$0.value.isIdle(settings, at: now) }
            }
            let record = OriginRecord(origin: origin, settings)
            records[origin] = record
            return record
        }
    }

    /// The record the call carries, or, for a pipeline without ``RetryStage`` (a test's),
    /// the record of the request's origin.
    func record(of request: Request, _ call: CallContext) -> OriginRecord {
        call.originRecord ?? record(for: request.origin)
    }

    /// How many origins the table holds, for tests.
    var count: Int { records.withLockedValue { $0.count } }
}
