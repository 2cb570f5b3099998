import Logging

/// What a client's resilience policies know: one record per origin for the policies that
/// keep one, the calls in flight for coalescing, and the rate limit's turns per key.
/// Made once per client and shared with the clients derived from it
/// (``Client/adding(middlewares:)``), so that a service's calls and the client's count
/// together.
final class ResilienceState: Sendable {
    let origins: OriginRecords
    let calls: InFlightCalls?
    /// Kept apart from the origins' records: the rate limit's key may be one the user names
    /// (an account), and it is taken on every hop, not once per call.
    let turns: KeyedStates<RateLimitTurns>?
    /// With a shared rate limit, the turns this process took from its store and has not used:
    /// here, so that a service's calls and the client's draw on one batch.
    let sharedTurns: KeyedStates<SharedRateLimitTurns>?
    /// With shared pauses, the fleet's pauses as this process last read them.
    let fleetPauses: FleetPauses?
    /// With a shared circuit breaker, the fleet's open circuits as this process last read them.
    let fleetCircuits: FleetPauses?

    init(_ settings: Client.Configuration.Resilience, clock: any ClientClock, logger: Logger) {
        origins = OriginRecords(clock: clock)
        calls = settings.coalescing.map { InFlightCalls($0) }
        turns = settings.rateLimit.map { KeyedStates($0, clock: clock) }
        sharedTurns = settings.rateLimit.flatMap { limit in limit.sharing.map { _ in KeyedStates(limit, clock: clock) } }
        fleetPauses = settings.sharedBackoff?.sharing.map { FleetPauses($0, clock: clock, logger: logger, policy: "shared pause") }
        fleetCircuits = settings.circuitBreaker?.sharing.map { FleetPauses($0, clock: clock, logger: logger, policy: "circuit breaker") }
    }
}
