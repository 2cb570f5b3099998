import NIOConcurrencyHelpers

/// A policy's state for every key it is given, behind one lock: the rate limit's turns, whose
/// key is the origin unless the user names another.
///
/// The table holds at most ``capacity`` keys that are not idle: when it is full, idle ones
/// are forgotten first, so a client that calls endless origins does not keep them all.
final class KeyedStates<State: OriginState>: Sendable {
    let settings: State.Settings
    /// The client's clock, for the states that keep time.
    private let clock: any ClientClock
    private let states = NIOLockedValueBox<[String: State]>([:])

    static var capacity: Int { 1024 }

    init(_ settings: State.Settings, clock: any ClientClock = SystemClock()) {
        self.settings = settings
        self.clock = clock
    }

    /// Runs `body` on the state of `key`, under the lock.
    func update<Result>(_ key: String, _ body: (inout State) -> Result) -> Result {
        states.withLockedValue { states in
            // The count first: looking the key up hashes it, and copies its state out.
            if states.count >= Self.capacity, states[key] == nil {
                let now = clock.instant
                states = states.filter { !$0.value.isIdle(settings, at: now) }
            }
            return body(&states[key, default: State(settings)])
        }
    }
}
