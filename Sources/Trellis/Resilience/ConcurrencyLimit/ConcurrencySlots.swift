import NIOCore

/// One origin's attempts in flight and the calls waiting for a place, in order.
struct ConcurrencySlots: OriginState {
    struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    var inFlight = 0
    var waiters = CircularBuffer<Waiter>()
    /// Numbers the waiters, to find one that gives up.
    var nextWaiter: UInt64 = 0

    init(_ limit: ConcurrencyLimit) {}

    func isIdle(_ limit: ConcurrencyLimit, at now: ContinuousClock.Instant) -> Bool { inFlight == 0 && waiters.isEmpty }

    /// Takes `id` out of the queue, if it is still there.
    mutating func removeWaiter(_ id: UInt64) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index)
    }

    /// Gives the place of an attempt that ended to the first waiter, or frees it.
    mutating func release() -> Waiter? {
        if let next = waiters.popFirst() { return next }
        inFlight -= 1
        return nil
    }
}
