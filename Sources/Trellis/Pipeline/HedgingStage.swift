/// Sends each attempt of an idempotent call, and a hedge of it when it has not answered
/// after the ``Hedging`` delay; returns the first answer and cancels the other attempts.
struct HedgingStage: Stage {
    let hedging: Hedging
    let latencies: OriginStates<RecentLatencies>
    /// The origin's retry budget, which each hedge draws on, when the client has one.
    let budgets: OriginStates<RetryTokens>?

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        hedging.maximumHedges > 0 && RetryPolicy.isIdempotent(request.method) && (request.body?.isReplayable ?? true)
    }

    private enum Outcome: Sendable {
        case answered(Response<ResponseBody>, after: Duration)
        case failed(any Error)
        case delayPassed
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var shared = call
        let origin = shared.originOfAttempt(request)
        let call = shared
        let delay = switch hedging.delay {
        case .fixed(let delay): delay
        case .percentile(let percentile, let initially): latencies.update(origin) { $0.value(at: percentile) } ?? initially
        }
        return try await withThrowingTaskGroup(of: Outcome.self) { group in
            let attempt: @Sendable () async -> Outcome = {
                let started = ContinuousClock.now
                do {
                    let response = try await next(request, call)
                    return .answered(response, after: .now - started)
                } catch {
                    return .failed(error)
                }
            }
            let timer: @Sendable () async -> Outcome = {
                try? await Task.sleep(for: delay)
                return .delayPassed
            }
            group.addTask(operation: attempt)
            group.addTask(operation: timer)
            var attemptsOut = 1
            var hedgesSent = 0
            var firstError: (any Error)?
            while let outcome = try await group.next() {
                switch outcome {
                case .answered(let response, let latency):
                    if case .percentile = hedging.delay { latencies.update(origin) { $0.record(latency) } }
                    group.cancelAll()
                    // An attempt that answered at the same moment: its answer is not wanted.
                    while let other = try await group.next() {
                        if case .answered(let unwanted, _) = other { await unwanted.body.discard() }
                    }
                    return response
                case .failed(let error):
                    attemptsOut -= 1
                    if firstError == nil { firstError = error }
                    if attemptsOut == 0 {
                        group.cancelAll()
                        throw firstError ?? error
                    }
                case .delayPassed:
                    guard hedgesSent < hedging.maximumHedges, !Task.isCancelled else { continue }
                    if let budgets, case let budget = budgets.retryAllowance(origin), !budget.allowed {
                        call.observation?.resilienceEvent(.retryRefusedByBudget(origin: origin, tokens: budget.tokens), for: request)
                        continue
                    }
                    hedgesSent += 1
                    attemptsOut += 1
                    call.observation?.resilienceEvent(.hedgeSent(origin: origin, after: delay), for: request)
                    group.addTask(operation: attempt)
                    if hedgesSent < hedging.maximumHedges { group.addTask(operation: timer) }
                }
            }
            throw firstError ?? CancellationError()
        }
    }
}
