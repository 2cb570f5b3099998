/// The origin's ``CircuitBreaker`` around each attempt: refuses it while the circuit is open,
/// here or, when openings are shared, in another process of the fleet; lets it through as a
/// probe when the cool-down is over, and records how it ended.
struct CircuitBreakerStage: Stage {
    let breaker: CircuitBreaker
    let context: PolicyContext
    /// The fleet's open circuits, when openings are shared.
    let fleet: FleetPauses?
    private let circuits: OriginStateKey<CircuitState>
    /// What counts as a failure.
    private let failures: FailureClassifier

    init(_ breaker: CircuitBreaker, fleet: FleetPauses? = nil, context: PolicyContext) {
        self.breaker = breaker
        self.context = context
        self.fleet = fleet
        circuits = OriginStateKey(breaker)
        failures = context.failures(of: breaker)!
    }

    var keepsStatePerOrigin: Bool { true }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let record = context.origins.record(of: request, call)
        let origin = record.origin
        if let fleet { try await refuseIfTheFleetOpened(origin, fleet, request, call) }
        let clock = context.clock
        let probe: Bool
        switch record.withState(circuits, { $0.admit(at: clock.instant, breaker) }) {
        case .pass:
            probe = false
        case .probe(let halfOpened):
            probe = true
            if halfOpened { context.report(.circuitHalfOpened(origin: origin), request, call) }
        case .refuse(let reason, let retryAt, let detail):
            throw context.refusal(request, call, origin: origin, reason: reason, retryAt: retryAt, detail: detail)
        }
        let response: Response<ResponseBody>
        do {
            response = try await next(request, call)
        } catch {
            let outcome = AttemptOutcome(failure: error)
            if let outcome, outcome.wasSent, failures.isFailure(outcome) {
                note(failed: true, probe: probe, record: record, request: request, call: call)
            } else if error is CancellationError || Task.isCancelled || outcome?.wasSent == false {
                // Nothing was learned about the origin: the attempt was given up, or a later
                // policy (the shared pause, the concurrency limit) refused to send it.
                if probe { record.withState(circuits) { $0.releaseProbe() } }
            } else {
                // The server answered, though not with something the call could use.
                note(failed: false, probe: probe, record: record, request: request, call: call)
            }
            throw error
        }
        note(failed: failures.isFailure(.answered(response.head)), probe: probe, record: record, request: request, call: call)
        return response
    }

    /// Records how an attempt ended in the circuit, and reports the circuit's change.
    private func note(failed: Bool, probe: Bool, record: OriginRecord, request: Request, call: CallContext) {
        let origin = record.origin
        let change = record.withState(circuits) { $0.record(failed: failed, probe: probe, clock: context.clock, breaker) }
        switch change {
        case .opened(let until, let detail):
            fleet?.announce(origin, pause: breaker.coolDown)
            context.report(.circuitOpened(origin: origin, until: until, detail: detail), request, call)
        case .closed:
            context.report(.circuitClosed(origin: origin), request, call)
        case nil:
            break
        }
    }

    /// Refuses the attempt while another process of the fleet has the origin's circuit open;
    /// when the store fails, goes on with this process's circuit or refuses, as the sharing's
    /// setting says.
    private func refuseIfTheFleetOpened(_ origin: String, _ fleet: FleetPauses, _ request: Request, _ call: CallContext) async throws {
        switch await fleet.pause(of: origin) {
        case .paused(nil):
            return
        case .paused(let until?):
            let left = until - context.clock.instant
            throw context.refusal(
                request, call, origin: origin, reason: .circuitOpen, retryAt: context.date(in: left),
                detail: "opened by a process of the fleet, \(String(format: "%.1f", left.inSeconds)) s of its cool-down left"
            )
        case .storeFailed(let detail):
            try context.sharedStateFailed(
                detail, policy: "circuit_breaker", settings: fleet.sharing.settings,
                unknown: "the fleet's open circuits are", reason: .circuitOpen, request, call, origin: origin
            )
        }
    }
}
