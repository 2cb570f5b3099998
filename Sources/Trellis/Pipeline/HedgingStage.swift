/// Sends each attempt of an idempotent call, and a hedge of it when it has not answered
/// after the ``Hedging`` delay; returns the first answer and cancels the other attempts
/// (``HedgeRace``). Hedges run in a task the call makes, with its task-local values.
struct HedgingStage: Stage {
    let hedging: Hedging
    /// The origins' records: their recent answer times, and their retry budgets, which each
    /// hedge draws on, when the client has one.
    let origins: OriginRecords
    /// The client's retry budget, if any.
    let budget: RetryBudget?
    /// The answers that do not win while another attempt is out; `nil` when every answer wins.
    let failures: FailureClassifier?
    /// The client's clock, which delays and answer times are measured on.
    let clock: any ClientClock
    /// Whether ``clock`` is the system's, whose delays the event loop's timer watches; another
    /// clock (a test's) is slept on. Worked out once, not at each hedged call.
    let delaysOnTheEventLoop: Bool
    /// One timer for the delays of all the client's calls: a call that starts or ends touches
    /// only its lock, where `Task.sleep` would schedule a timer per call.
    let delays = DeadlineTimer<HedgeRace> { $0.delayPassed() }

    init(
        hedging: Hedging, origins: OriginRecords, failures: FailureClassifier?, clock: any ClientClock
    ) {
        self.hedging = hedging
        self.origins = origins
        budget = origins.settings.retryBudget
        self.failures = failures
        self.clock = clock
        delaysOnTheEventLoop = clock is SystemClock
    }

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        hedging.maximumHedges > 0 && request.canBeSentAgain
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var first = call
        let record = origins.record(of: request, call)
        let delay = switch hedging.delay {
        case .fixed(let delay): delay
        case .percentile(let percentile, let initially): record.latencies { $0.value(at: percentile) } ?? initially
        }
        let race = HedgeRace(self, record: record, delay: delay, request: request, call: first, next: next)
        first.cancellation = race.firstAttempt
        // Inherits the caller's task-local values and priority, and runs on this thread until it
        // waits for the delay.
        let hedger = Task.immediate { await race.sendHedges() }
        // Decided: the delay's wait, and the hedges still out, end.
        defer { hedger.cancel() }
        return try await withTaskCancellationHandler {
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
