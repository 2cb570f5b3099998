/// Counts each attempt sent against its origin's ``RetryBudget``: one that is a failure takes a
/// token, any other answer puts a share of one back. The retry and hedging stages ask the
/// budget before they send another attempt.
struct RetryBudgetStage: Stage {
    let budget: RetryBudget
    let context: PolicyContext
    private let tokens: OriginStateKey<RetryTokens>
    /// The budget's classifier, else the client's, when either is set: it decides for every
    /// request.
    private let failures: FailureClassifier?
    /// The client's retry policy's rule, for requests without a policy of their own when
    /// neither classifier is set.
    private let retryFailures: FailureClassifier

    init(_ budget: RetryBudget, context: PolicyContext) {
        self.budget = budget
        self.context = context
        tokens = OriginStateKey(budget)
        failures = context.failures(of: budget)
        retryFailures = context.ownFailures(of: context.retry)!
    }

    var keepsStatePerOrigin: Bool { true }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let failures = failures ?? request.retryPolicy.flatMap(context.ownFailures(of:)) ?? retryFailures
        let record = context.origins.record(of: request, call)
        let response: Response<ResponseBody>
        do {
            response = try await next(request, call)
        } catch {
            if let outcome = AttemptOutcome(failure: error), outcome.wasSent, failures.isFailure(outcome) {
                record.withState(tokens) { $0.recordFailure() }
            }
            throw error
        }
        if failures.isFailure(.answered(response.head)) {
            record.withState(tokens) { $0.recordFailure() }
        } else {
            record.withState(tokens) { $0.recordAnswer(budget) }
        }
        return response
    }
}
