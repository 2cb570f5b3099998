import NIOCore

/// One key's turns taken from a ``RateLimitStorage`` by this process, not used yet, and the
/// batch being taken, if any: the callers that find no turn left wait for that one fetch
/// together. A turn is kept until it is used, however late: the process holds at most one
/// batch, so that is all it can send beyond the fleet's schedule.
struct SharedRateLimitTurns: OriginState {
    /// When each turn held may go, earliest first.
    var turns = CircularBuffer<ContinuousClock.Instant>()
    /// The batch being taken from the store, and the store's failure.
    var store = StoreAccess()

    init(_ limit: RateLimit) {}

    /// Turns held do not keep a key: a client that calls endless keys would keep a batch of
    /// each. Forgetting them gives up at most a batch of the fleet's quota.
    func isIdle(_ limit: RateLimit, at now: ContinuousClock.Instant) -> Bool {
        store.isIdle(at: now)
    }
}
