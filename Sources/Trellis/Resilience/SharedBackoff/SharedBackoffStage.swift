/// Holds each attempt until the origin's pause (``SharedBackoff``) is over, this process's or,
/// when pauses are shared, the fleet's; and starts a pause when a response asks for one.
struct SharedBackoffStage: Stage {
    let backoff: SharedBackoff
    let context: PolicyContext
    /// The fleet's pauses, when they are shared.
    let fleet: FleetPauses?
    private let pauses: OriginStateKey<BackoffPause>
    /// The answers whose pauses are shared.
    private let failures: FailureClassifier

    init(_ backoff: SharedBackoff, fleet: FleetPauses? = nil, context: PolicyContext) {
        self.backoff = backoff
        self.context = context
        self.fleet = fleet
        pauses = OriginStateKey(backoff)
        failures = context.failures(of: backoff)!
    }

    var keepsStatePerOrigin: Bool { true }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let clock = context.clock
        let record = context.origins.record(of: request, call)
        let origin = record.origin
        let fleetUntil = try await fleetPause(of: origin, request, call)
        // Again after each wait: another answer may have made the pause longer meanwhile.
        while let until = [record.withState(pauses, { $0.until }), fleetUntil].compactMap({ $0 }).max(), case let now = clock.instant, until > now {
            let ends = context.date(in: until - now)
            guard until - now <= backoff.maximumWait else {
                throw context.refusal(
                    request, call, origin: origin, reason: .rateLimited, retryAt: ends,
                    detail: "\(String(format: "%.1f", (until - now).inSeconds)) s more, longer than the \(backoff.maximumWait) the client waits"
                )
            }
            context.report(.waitedForBackoff(origin: origin, until: ends), request, call)
            try await clock.sleep(for: until - now)
        }
        let response = try await next(request, call)
        if let pause = backoff.pause(askedBy: response.head, failures: failures, now: clock.now) {
            let until = clock.instant + pause
            record.withState(pauses) { state in state.until = max(state.until ?? until, until) }
            fleet?.announce(origin, pause: pause)
            context.report(.backoffStarted(origin: origin, status: response.status.code, until: context.date(in: pause)), request, call)
        }
        return response
    }

    /// When the fleet's pause of `origin` ends, if it has one; when the store fails, `nil`
    /// (the process's own pauses) or a refusal, as the sharing's setting says.
    private func fleetPause(of origin: String, _ request: Request, _ call: CallContext) async throws -> ContinuousClock.Instant? {
        guard let fleet else { return nil }
        switch await fleet.pause(of: origin) {
        case .paused(let until):
            return until
        case .storeFailed(let detail):
            try context.sharedStateFailed(
                detail, policy: "shared_backoff", settings: fleet.sharing.settings,
                unknown: "the fleet's pauses are", reason: .rateLimited, request, call, origin: origin
            )
            return nil
        }
    }
}
