import Foundation

/// The origin's ``CircuitBreaker`` around each attempt: refuses it while the circuit is open,
/// lets it through as a probe when the cool-down is over, and records how it ended.
struct CircuitBreakerStage: Stage {
    let origins: OriginRecords
    let breaker: CircuitBreaker
    /// What counts as a failure.
    private let failures: FailureClassifier
    /// The client's clock, which cool-downs and windows are measured on.
    let clock: any ClientClock

    init(origins: OriginRecords, breaker: CircuitBreaker, clientFailures: FailureClassifier?, clock: any ClientClock) {
        self.origins = origins
        self.breaker = breaker
        self.clock = clock
        failures = breaker.failures(clientWide: clientFailures)
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let record = origins.record(of: request, call)
        let origin = record.origin
        let probe: Bool
        switch record.circuit({ $0.admit(at: clock.instant, breaker) }) {
        case .pass:
            probe = false
        case .probe(let halfOpened):
            probe = true
            if halfOpened { call.observation?.resilienceEvent(.circuitHalfOpened(origin: origin), for: request) }
        case .refuse(let reason, let retryAt, let detail):
            let refusal = CallRefusal(request: request, origin: origin, reason: reason, retryAt: retryAt, detail: detail)
            call.observation?.resilienceEvent(.callRefused(refusal), for: request)
            throw TrellisError.callRefused(refusal)
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
                if probe { record.circuit { $0.releaseProbe() } }
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
        let change = record.circuit { $0.record(failed: failed, probe: probe, clock: clock, breaker) }
        switch change {
        case .opened(let until, let detail):
            call.observation?.resilienceEvent(.circuitOpened(origin: origin, until: until, detail: detail), for: request)
        case .closed:
            call.observation?.resilienceEvent(.circuitClosed(origin: origin), for: request)
        case nil:
            break
        }
    }
}
