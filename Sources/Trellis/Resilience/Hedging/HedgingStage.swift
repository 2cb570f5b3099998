/// Sends each attempt of an idempotent call, and a hedge of it when it has not answered
/// after the ``Hedging`` delay; returns the first answer and cancels the other attempts
/// (``HedgeRace``). Hedges run in a task the call makes, with its task-local values.
struct HedgingStage: Stage {
    let hedging: Hedging
    let context: PolicyContext
    /// The client's retry budget, if any, which each hedge draws on.
    let budget: RetryBudget?
    /// The answers that do not win while another attempt is out; `nil` when every answer wins.
    let failures: FailureClassifier?
    /// The origins' recent answer times.
    let latencies: OriginStateKey<RecentLatencies>

    init(_ hedging: Hedging, budget: RetryBudget?, context: PolicyContext) {
        self.hedging = hedging
        self.context = context
        self.budget = budget
        failures = context.failures(of: hedging)
        latencies = OriginStateKey(hedging)
    }

    var keepsStatePerOrigin: Bool { true }

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        hedging.maximumHedges > 0 && request.canBeSentAgain
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var first = call
        let record = context.origins.record(of: request, call)
        let delay = switch hedging.delay {
        case .fixed(let delay): delay
        case .percentile(let percentile, let initially): record.withState(latencies) { $0.value(at: percentile) } ?? initially
        }
        let race = HedgeRace(self, record: record, delay: delay, request: request, call: first, next: next)
        first.cancellation = race.firstAttempt
        // Inherits the caller's task-local values and priority, and runs on this thread until it
        // waits for the delay.
        let hedger = Task.immediate { await race.sendHedges() }
        // Decided: the delay's wait, and the hedges still out, end.
        defer { hedger.cancel() }
        return try await withTaskCancellationHandler {
            let clock = context.clock
            let started = clock.instant
            let response: Response<ResponseBody>
            do {
                response = try await next(request, first)
            } catch {
                return try await race.firstFailed(error)
            }
            return try await race.firstAnswered(response, after: clock.instant - started)
        } onCancel: {
            hedger.cancel()
        }
    }
}
