import Logging

/// A client's pipeline: every stage a request passes on its way to the transport, in order.
///
/// ``stages(for:)`` is the one place that lists them; "The pipeline" article
/// follows it. The stages up to ``RetryStage`` run once per call, ``TimeLimitStage`` once per
/// attempt, and the stages inside ``RedirectStage`` on every hop (each redirect, and each
/// retry attempt since retries sit outside redirects).
final class Pipeline: Sendable {
    /// Outermost first; the transport follows the last.
    let stages: [any Stage]
    let transport: any Transport
    /// Whether the transport cancels an exchange when its attempt is called off
    /// (``Transport/cancelsCalledOffExchanges``), so that it need not run in a task of its own.
    /// What it buys: 5% of a loopback GET with hedging on (0.896 against 0.852 of raw, A/B in
    /// `Benchmarks/README.md`, "Hedging without a task per attempt").
    let transportCancelsAttempts: Bool

    /// What a pipeline is made from: a client's settings.
    struct Settings {
        var middlewares: [any Middleware]
        var configuration: Client.Configuration
        var authorizer: AccessTokenAuthorizer
        var client: ClientReference
        var pinningConflict: TrellisError?
        var transport: any Transport
        var resilience: ResilienceState
    }

    /// A client's pipeline: ``stages(for:)`` in front of its transport.
    convenience init(_ settings: Settings) {
        self.init(stages: Self.stages(for: settings), transport: settings.transport)
    }

    /// `stages` in front of `transport`: a client's, or a test's few.
    init(stages: [any Stage], transport: any Transport) {
        self.stages = stages
        self.transport = transport
        transportCancelsAttempts = transport.cancelsCalledOffExchanges
    }

    /// The pipeline, in order.
    static func stages(for settings: Settings) -> [any Stage] {
        let configuration = settings.configuration
        // A middleware of Trellis's own (``APIKey``) sees the call's context; any other passes
        // it by.
        let asStage = { (middleware: any Middleware) -> any Stage in (middleware as? any Stage) ?? MiddlewareStage(middleware: middleware) }
        let callMiddlewares = settings.middlewares.filter { $0.scope == .call }.map(asStage)
        let hopMiddlewares = settings.middlewares.filter { $0.scope == .hop }.map(asStage)
        var stages: [any Stage] = []
        // Once per call: the call's span and metrics around everything, the caller's
        // middlewares (the client's, then a service's), then the checks before and after,
        // and the retries; each attempt with its hedges, the resilience policies of its
        // origin and its time limits.
        stages.append(ObservationStage(settings: configuration.observability))
        stages.append(IdempotencyKeyStage(
            settings: configuration.idempotencyKeys ?? IdempotencyKeySettings(), keysMethods: configuration.idempotencyKeys != nil,
            clock: configuration.clock, logger: configuration.logger
        ))
        stages += callMiddlewares
        stages.append(PreconditionStage(preconditions: configuration.validation.preconditions))
        stages.append(ValidationStage(
            validations: configuration.validation.validations,
            acceptedStatuses: configuration.validation.acceptedStatuses
        ))
        let resilience = settings.resilience
        let policies = configuration.resilience
        // What every policy's stage is made with: the client's clock, logger, classifier and
        // origin records.
        let context = PolicyContext(
            clock: configuration.clock, logger: configuration.logger, clientFailures: policies.failureClassifier,
            retry: configuration.retry, origins: resilience.origins
        )
        // Around each attempt, in order: its hedges, then the policies of its origin.
        var attempt: [any Stage] = []
        if let hedging = policies.hedging { attempt.append(HedgingStage(hedging, budget: policies.retryBudget, context: context)) }
        if let breaker = policies.circuitBreaker { attempt.append(CircuitBreakerStage(breaker, fleet: resilience.fleetCircuits, context: context)) }
        if let backoff = policies.sharedBackoff { attempt.append(SharedBackoffStage(backoff, fleet: resilience.fleetPauses, context: context)) }
        if let limit = policies.concurrencyLimit { attempt.append(ConcurrencyLimitStage(limit, context: context)) }
        if let budget = policies.retryBudget { attempt.append(RetryBudgetStage(budget, context: context)) }
        stages.append(RetryStage(
            policy: configuration.retry, budget: policies.retryBudget,
            looksUpOrigins: attempt.contains { $0.keepsStatePerOrigin }, context: context
        ))
        stages += attempt
        stages.append(TimeLimitStage(timeouts: configuration.timeouts))
        stages.append(RedirectStage(
            policy: configuration.redirects,
            secretQueryNames: Set(settings.middlewares.compactMap { ($0 as? APIKey)?.queryName })
        ))
        // On every hop, for the URL of that hop.
        stages += hopMiddlewares
        stages.append(AccessTokenStage(authorizer: settings.authorizer, client: settings.client))
        stages.append(DefaultHeadersStage(defaultHeaders: configuration.defaultHeaders))
        if let jar = configuration.cookies {
            stages.append(CookieStage(jar: jar, logger: configuration.logger, clock: configuration.clock))
        }
        stages.append(CompressionStage(settings: configuration.compression))
        // After every stage that adds to the request, so that calls share an exchange only
        // when they would send the same thing; before the cache, so that callers who miss
        // together cost one fetch and one store.
        if let calls = resilience.calls { stages.append(CoalescingStage(calls: calls)) }
        if let cache = configuration.cache {
            stages.append(CacheStage(cache: cache, clock: configuration.clock))
        }
        if configuration.security.plainHTTP != .allowed || settings.pinningConflict != nil {
            stages.append(OriginPolicyStage(
                plainHTTP: configuration.security.plainHTTP, pinningConflict: settings.pinningConflict, transport: settings.transport
            ))
        }
        // Only what goes out takes a turn: after the cache, coalescing and the refusals.
        if let turns = resilience.turns { stages.append(RateLimitStage(turns: turns, sharedTurns: resilience.sharedTurns, context: context)) }
        // Below the cache and coalescing, which share what it hands up: a head that says what
        // its body is. Above the hop's observation, which records the exchange as it was.
        if settings.transport.decodesContentEncoding {
            stages.append(TransportDecodingStage(settings: configuration.compression))
        }
        stages.append(HopObservationStage(transportDecodes: settings.transport.decodesContentEncoding))
        if configuration.logger.logLevel <= .debug {
            stages.append(LoggingStage(logger: configuration.logger))
        }
        return stages
    }

    /// What a pipeline ends in instead of its transport: the WebSocket upgrade, which needs a
    /// connection of its own.
    typealias Terminal = @Sendable (Request, CallContext) async throws -> Response<ResponseBody>

    /// Sends `request` down the stages to the transport, or to `terminal` instead, whose
    /// connection reaches the hosts `hostsReached` gives. `bufferLimit` makes it a buffered
    /// call: the response comes back with its whole body in memory.
    func send(
        _ request: Request,
        bufferLimit: Int? = nil,
        hostsReached: (@Sendable (Request) -> [String])? = nil,
        terminal: Terminal? = nil
    ) async throws -> Response<ResponseBody> {
        var call = CallContext(bufferLimit: bufferLimit)
        call.hostsReached = hostsReached
        return try await Next(pipeline: self, from: 0, terminal: terminal)(request, call)
    }

    /// The rest of a pipeline, from one of its stages on: what a stage calls to pass a request
    /// on (OkHttp's `Chain`). Calling it enters the first stage from there that the request
    /// needs, or, past the last stage, the transport.
    struct Next: Sendable {
        let pipeline: Pipeline
        let index: Int
        let terminal: Terminal?

        init(pipeline: Pipeline, from index: Int, terminal: Terminal? = nil) {
            self.pipeline = pipeline
            self.index = index
            self.terminal = terminal
        }

        func callAsFunction(_ request: Request, _ call: CallContext) async throws -> Response<ResponseBody> {
            let stages = pipeline.stages
            guard let stage = stages[index...].firstIndex(where: { $0.isNeeded(for: request, call) }) else {
                try Task.checkCancellation()
                guard let cancellation = call.cancellation else { return try await exchange(request, call) }
                // The first attempt of a hedged call, which a hedge may call off.
                if cancellation.isCalledOff { throw CancellationError() }
                if terminal == nil && pipeline.transportCancelsAttempts { return try await exchange(request, call) }
                return try await cancellation.run { try await exchange(request, call) }
            }
            return try await stages[stage].intercept(request, call, next: Next(pipeline: pipeline, from: stage + 1, terminal: terminal))
        }

        /// The exchange at the end of the pipeline: the transport's, or the terminal's.
        private func exchange(_ request: Request, _ call: CallContext) async throws -> Response<ResponseBody> {
            if let terminal { return try await terminal(request, call) }
            return try await pipeline.transport.send(request, within: call.limitsOfAttempt)
        }
    }
}
