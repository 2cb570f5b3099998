extension Client.Configuration {
    /// Policies that span calls: each keeps what it learns about an origin
    /// (`scheme://host:port`) and applies it to every call the client makes there.
    ///
    /// All are off by default; turn on the ones a dependency needs. Each is a stage of the
    /// pipeline (<doc:ThePipeline>), reports what it does to the event monitors, spans and
    /// metrics (``ResilienceEvent``), and is described with its costs in <doc:Resilience>.
    ///
    /// ```swift
    /// let client = Client(baseURL: url) {
    ///     $0.retry = .standard
    ///     $0.resilience.retryBudget = RetryBudget()
    ///     $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(5), coolDown: .seconds(10))
    ///     $0.resilience.concurrencyLimit = ConcurrencyLimit(maximumInFlight: 8)
    /// }
    /// ```
    ///
    /// A client made with ``Client/adding(middlewares:)`` (a service's) shares its client's
    /// state: budgets, breakers, limits and pauses are per origin, not per service.
    public struct Resilience: Sendable {
        /// Stops retrying an origin whose calls keep failing (gRPC's retry throttling).
        public var retryBudget: RetryBudget?
        /// Refuses calls to an origin at once after a run of failures, for a cool-down.
        public var circuitBreaker: CircuitBreaker?
        /// At most so many calls in flight to each origin; the rest wait their turn.
        public var concurrencyLimit: ConcurrencyLimit?
        /// A `429` or `503` with `Retry-After` pauses every call to the origin, not only the
        /// one that got it.
        public var sharedBackoff: SharedBackoff?
        /// Sends a second attempt of an idempotent call that has not answered after a delay;
        /// the first answer wins.
        public var hedging: Hedging?
        /// Identical buffered `GET`s in flight together share one request and its response.
        public var coalescing: Coalescing?
        /// At most so many requests per period to each origin (or key you name); the rest wait
        /// their turn.
        public var rateLimit: RateLimit?
        /// Which attempts count as failures for every policy that has no classifier of its own:
        /// the retry policy, the budget, the breaker, hedging and the shared pause. `nil` keeps
        /// each policy's built-in rule (``FailureClassifier``).
        public var failureClassifier: FailureClassifier?

        /// Resilience settings; none are on unless given.
        public init(
            retryBudget: RetryBudget? = nil,
            circuitBreaker: CircuitBreaker? = nil,
            concurrencyLimit: ConcurrencyLimit? = nil,
            sharedBackoff: SharedBackoff? = nil,
            hedging: Hedging? = nil,
            coalescing: Coalescing? = nil,
            rateLimit: RateLimit? = nil,
            failureClassifier: FailureClassifier? = nil
        ) {
            self.retryBudget = retryBudget
            self.circuitBreaker = circuitBreaker
            self.concurrencyLimit = concurrencyLimit
            self.sharedBackoff = sharedBackoff
            self.hedging = hedging
            self.coalescing = coalescing
            self.rateLimit = rateLimit
            self.failureClassifier = failureClassifier
        }
    }
}
