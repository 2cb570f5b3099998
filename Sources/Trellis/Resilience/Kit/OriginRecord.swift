import NIOConcurrencyHelpers

/// What one resilience policy keeps about one origin: its retry tokens, its circuit, its calls
/// in flight.
protocol OriginState: Sendable {
    associatedtype Settings: Sendable
    /// The state of an origin the policy knows nothing about yet.
    init(_ settings: Settings)
    /// Whether the state is no different from a new one's at `now`, so that it may be forgotten.
    func isIdle(_ settings: Settings, at now: ContinuousClock.Instant) -> Bool
}

/// Names one policy's state in every origin's record: the state's type, and the settings a
/// record makes it from for an origin new to the policy. A policy's stage holds its key.
struct OriginStateKey<State: OriginState>: Sendable {
    let settings: State.Settings

    init(_ settings: State.Settings) {
        self.settings = settings
    }
}

/// What a client's resilience policies keep about one origin, together, each policy's state
/// under its type: a policy added to the client adds its state here without a change to the
/// record.
///
/// ``RetryStage`` looks the record of a call's origin up once and passes it on in
/// ``CallContext/originRecord``; every policy's stage then works on it under its one lock,
/// without hashing the origin again.
final class OriginRecord: @unchecked Sendable {
    let origin: String
    private let lock = NIOLock()
    /// Each policy's state by the type of its state, made on the policy's first use; read and
    /// written only under `lock`.
    private var states: [ObjectIdentifier: any AnyStoredState] = [:]

    init(origin: String) {
        self.origin = origin
    }

    /// Runs `body` on the state `key` names, under the record's lock.
    func withState<State: OriginState, Result>(_ key: OriginStateKey<State>, _ body: (inout State) -> Result) -> Result {
        lock.withLock {
            let id = ObjectIdentifier(State.self)
            let stored: Stored<State>
            if let existing = states[id] {
                // Stored under its own type's identifier, so the cast cannot fail.
                stored = unsafeDowncast(existing as AnyObject, to: Stored<State>.self)
            } else {
                stored = Stored(key.settings)
                states[id] = stored
            }
            return body(&stored.state)
        }
    }

    /// Whether every policy's state is no different from a new one's at `now`.
    func isIdle(at now: ContinuousClock.Instant) -> Bool {
        lock.withLock { states.values.allSatisfy { $0.isIdle(at: now) } }
    }

    /// One policy's state, with the settings that say when it is idle.
    private final class Stored<State: OriginState>: AnyStoredState {
        let settings: State.Settings
        var state: State

        init(_ settings: State.Settings) {
            self.settings = settings
            state = State(settings)
        }

        func isIdle(at now: ContinuousClock.Instant) -> Bool { state.isIdle(settings, at: now) }
    }
}

/// A policy's state in a record, whatever its type.
private protocol AnyStoredState: AnyObject {
    func isIdle(at now: ContinuousClock.Instant) -> Bool
}

/// The record of every origin a client calls (``OriginRecord``), behind one lock.
///
/// The table holds at most ``capacity`` origins that are not idle: when it is full, idle ones
/// are forgotten first, so a client that calls endless origins does not keep them all. An
/// origin with calls in flight under a concurrency limit is never idle, so the table only
/// outgrows its capacity by what is in flight.
final class OriginRecords: Sendable {
    /// The client's clock, for the states that keep time.
    private let clock: any ClientClock
    private let records = NIOLockedValueBox<[String: OriginRecord]>([:])

    static var capacity: Int { 1024 }

    init(clock: any ClientClock) {
        self.clock = clock
    }

    /// The record of `origin`, made if there is none.
    func record(for origin: String) -> OriginRecord {
        records.withLockedValue { records in
            if let record = records[origin] { return record }
            if records.count >= Self.capacity {
                let now = clock.instant
                records = records.filter { !$0.value.isIdle(at: now) }
            }
            let record = OriginRecord(origin: origin)
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
