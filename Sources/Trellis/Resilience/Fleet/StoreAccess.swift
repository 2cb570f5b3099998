/// How a process reaches a store a fleet shares, kept inside the state the store feeds (the
/// fleet's pauses, a key's batch of turns): at most one operation on the store at a time,
/// which every caller that needs it waits for together (single flight), and, after the store
/// failed, the time until which it is left alone.
///
/// The state's owner holds it under its lock. A caller that finds nothing usable in the state
/// takes the store's ``failure(at:waitedAlready:)`` as its answer if there is one, and otherwise
/// waits for the operation it ``join(start:)``s and looks again; ``finished(failure:at:retryAfter:)``
/// records how the operation ended.
struct StoreAccess {
    /// The operation under way, if any.
    private(set) var inFlight: Task<Void, Never>?
    /// Until when the store is not asked again after it failed, and how it failed.
    private(set) var failure: (until: ContinuousClock.Instant, detail: String)?

    /// How the store failed, when a caller is to take that as the answer: while the store is
    /// left alone, or once the caller has waited for an operation (which then failed: at a zero
    /// `retryStorageAfter` it would ask again, endlessly).
    func failure(at now: ContinuousClock.Instant, waitedAlready: Bool) -> String? {
        guard let failure, waitedAlready || failure.until > now else { return nil }
        return failure.detail
    }

    /// The operation under way, or one `start` makes: what the caller waits for.
    mutating func join(start: () -> Task<Void, Never>) -> Task<Void, Never> {
        if let inFlight { return inFlight }
        let operation = start()
        inFlight = operation
        return operation
    }

    /// The operation ended at `now`; a `failure` leaves the store alone for `retryAfter`.
    mutating func finished(failure detail: String?, at now: ContinuousClock.Instant, retryAfter: Duration) {
        inFlight = nil
        failure = detail.map { (now + retryAfter, $0) }
    }

    /// Whether there is nothing to keep: no operation under way, and no failure in force.
    func isIdle(at now: ContinuousClock.Instant) -> Bool {
        inFlight == nil && (failure.map { $0.until <= now } ?? true)
    }
}
