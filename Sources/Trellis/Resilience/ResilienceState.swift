/// What a client's resilience policies know, per origin: one table per policy that is on.
/// Made once per client and shared with the clients derived from it
/// (``Client/adding(middlewares:)``), so that a service's calls and the client's count
/// together.
final class ResilienceState: Sendable {
    let budgets: OriginStates<RetryTokens>?
    let circuits: OriginStates<CircuitState>?
    let slots: OriginStates<ConcurrencySlots>?
    let pauses: OriginStates<BackoffPause>?
    let latencies: OriginStates<RecentLatencies>?
    let hedging: Hedging?
    let calls: InFlightCalls?
    let turns: OriginStates<RateLimitTurns>?

    init(_ settings: Client.Configuration.Resilience, clock: any ClientClock) {
        budgets = settings.retryBudget.map { OriginStates($0) }
        circuits = settings.circuitBreaker.map { OriginStates($0) }
        slots = settings.concurrencyLimit.map { OriginStates($0) }
        pauses = settings.sharedBackoff.map { OriginStates($0, clock: clock) }
        latencies = settings.hedging.map { OriginStates($0) }
        hedging = settings.hedging
        calls = settings.coalescing.map { InFlightCalls($0) }
        turns = settings.rateLimit.map { OriginStates($0, clock: clock) }
    }
}
