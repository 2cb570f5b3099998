import Foundation
import Logging

/// Holds each attempt until the origin's pause (``SharedBackoff``) is over, this process's or,
/// when pauses are shared, the fleet's; and starts a pause when a response asks for one.
struct SharedBackoffStage: Stage {
    let origins: OriginRecords
    let backoff: SharedBackoff
    /// The answers whose pauses are shared.
    private let failures: FailureClassifier
    /// The client's clock, which pauses are measured and waited on.
    let clock: any ClientClock
    /// The fleet's pauses, when they are shared.
    let fleet: FleetPauses?
    let logger: Logger

    init(
        origins: OriginRecords,
        backoff: SharedBackoff,
        clientFailures: FailureClassifier?,
        clock: any ClientClock,
        fleet: FleetPauses? = nil,
        logger: Logger = Logger(label: "Trellis")
    ) {
        self.origins = origins
        self.backoff = backoff
        self.clock = clock
        self.fleet = fleet
        self.logger = logger
        failures = backoff.failures(clientWide: clientFailures)
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let record = origins.record(of: request, call)
        let origin = record.origin
        let fleetUntil = try await fleetPause(of: origin, request, call)
        // Again after each wait: another answer may have made the pause longer meanwhile.
        while let until = [record.pause({ $0.until }), fleetUntil].compactMap({ $0 }).max(), case let now = clock.instant, until > now {
            let ends = clock.now.addingTimeInterval((until - now).inSeconds)
            guard until - now <= backoff.maximumWait else {
                let refusal = CallRefusal(
                    request: request, origin: origin, reason: .rateLimited, retryAt: ends,
                    detail: "\(String(format: "%.1f", (until - now).inSeconds)) s more, longer than the \(backoff.maximumWait) the client waits"
                )
                call.observation?.resilienceEvent(.callRefused(refusal), for: request)
                throw TrellisError.callRefused(refusal)
            }
            call.observation?.resilienceEvent(.waitedForBackoff(origin: origin, until: ends), for: request)
            try await clock.sleep(for: until - now)
        }
        let response = try await next(request, call)
        if let pause = backoff.pause(askedBy: response.head, failures: failures, now: clock.now) {
            let until = clock.instant + pause
            record.pause { state in state.until = max(state.until ?? until, until) }
            fleet?.announce(origin, pause: pause, logger: logger)
            call.observation?.resilienceEvent(
                .backoffStarted(origin: origin, status: response.status.code, until: clock.now.addingTimeInterval(pause.inSeconds)),
                for: request
            )
        }
        return response
    }

    /// When the fleet's pause of `origin` ends, if it has one; when the store fails, `nil`
    /// (the process's own pauses) or a refusal, as the sharing's setting says.
    private func fleetPause(of origin: String, _ request: Request, _ call: CallContext) async throws -> ContinuousClock.Instant? {
        guard let fleet else { return nil }
        switch await fleet.pause(of: origin, logger: logger) {
        case .paused(let until):
            return until
        case .storeFailed(let detail):
            call.observation?.resilienceEvent(.sharedStateFailed(origin: origin, policy: "shared_backoff", detail: detail), for: request)
            guard fleet.sharing.whenStoreFails == .refuseCalls else { return nil }
            let refusal = CallRefusal(
                request: request, origin: origin, reason: .rateLimited, retryAt: nil,
                detail: "the fleet's pauses are unknown, their store failed: \(detail)"
            )
            call.observation?.resilienceEvent(.callRefused(refusal), for: request)
            throw TrellisError.callRefused(refusal)
        }
    }
}
