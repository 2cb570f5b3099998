import Foundation

/// Holds each attempt until the origin's pause (``SharedBackoff``) is over, and starts a
/// pause when a response asks for one.
struct SharedBackoffStage: Stage {
    let origins: OriginRecords
    let backoff: SharedBackoff
    /// The answers whose pauses are shared.
    private let failures: FailureClassifier
    /// The client's clock, which pauses are measured and waited on.
    let clock: any ClientClock

    init(origins: OriginRecords, backoff: SharedBackoff, clientFailures: FailureClassifier?, clock: any ClientClock) {
        self.origins = origins
        self.backoff = backoff
        self.clock = clock
        failures = backoff.failures(clientWide: clientFailures)
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let record = origins.record(of: request, call)
        let origin = record.origin
        // Again after each wait: another answer may have made the pause longer meanwhile.
        while let until = record.pause({ $0.until }), case let now = clock.instant, until > now {
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
            call.observation?.resilienceEvent(
                .backoffStarted(origin: origin, status: response.status.code, until: clock.now.addingTimeInterval(pause.inSeconds)),
                for: request
            )
        }
        return response
    }
}
