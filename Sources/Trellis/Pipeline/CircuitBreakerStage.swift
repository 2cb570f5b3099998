import Foundation
import Logging

/// The origin's ``CircuitBreaker`` around each attempt: refuses it while the circuit is open,
/// here or, when openings are shared, in another process of the fleet; lets it through as a
/// probe when the cool-down is over, and records how it ended.
struct CircuitBreakerStage: Stage {
    let origins: OriginRecords
    let breaker: CircuitBreaker
    /// What counts as a failure.
    private let failures: FailureClassifier
    /// The client's clock, which cool-downs and windows are measured on.
    let clock: any ClientClock
    /// The fleet's open circuits, when openings are shared.
    let fleet: FleetPauses?
    let logger: Logger

    init(
        origins: OriginRecords,
        breaker: CircuitBreaker,
        clientFailures: FailureClassifier?,
        clock: any ClientClock,
        fleet: FleetPauses? = nil,
        logger: Logger = Logger(label: "Trellis")
    ) {
        self.origins = origins
        self.breaker = breaker
        self.clock = clock
        self.fleet = fleet
        self.logger = logger
        failures = breaker.failures(clientWide: clientFailures)
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let record = origins.record(of: request, call)
        let origin = record.origin
        if let fleet { try await refuseIfTheFleetOpened(origin, fleet, request, call) }
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
            fleet?.announce(origin, pause: breaker.coolDown, logger: logger)
            call.observation?.resilienceEvent(.circuitOpened(origin: origin, until: until, detail: detail), for: request)
        case .closed:
            call.observation?.resilienceEvent(.circuitClosed(origin: origin), for: request)
        case nil:
            break
        }
    }

    /// Refuses the attempt while another process of the fleet has the origin's circuit open;
    /// when the store fails, goes on with this process's circuit or refuses, as the sharing's
    /// setting says.
    private func refuseIfTheFleetOpened(_ origin: String, _ fleet: FleetPauses, _ request: Request, _ call: CallContext) async throws {
        let refusal: CallRefusal
        switch await fleet.pause(of: origin, logger: logger) {
        case .paused(nil):
            return
        case .paused(let until?):
            let left = until - clock.instant
            refusal = CallRefusal(
                request: request, origin: origin, reason: .circuitOpen, retryAt: clock.now.addingTimeInterval(left.inSeconds),
                detail: "opened by a process of the fleet, \(String(format: "%.1f", left.inSeconds)) s of its cool-down left"
            )
        case .storeFailed(let detail):
            call.observation?.resilienceEvent(.sharedStateFailed(origin: origin, policy: "circuit_breaker", detail: detail), for: request)
            guard fleet.sharing.whenStoreFails == .refuseCalls else { return }
            refusal = CallRefusal(
                request: request, origin: origin, reason: .circuitOpen, retryAt: nil,
                detail: "the fleet's open circuits are unknown, their store failed: \(detail)"
            )
        }
        call.observation?.resilienceEvent(.callRefused(refusal), for: request)
        throw TrellisError.callRefused(refusal)
    }
}
