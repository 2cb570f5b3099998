/// Counts each attempt sent against its origin's ``RetryBudget``: one that is a failure takes a
/// token, any other answer puts a share of one back. The retry and hedging stages ask the
/// budget before they send another attempt.
struct RetryBudgetStage: Stage {
    let origins: OriginRecords
    let budget: RetryBudget
    /// The budget's classifier, else the client's, when either is set: it decides for every
    /// request.
    private let failures: FailureClassifier?
    /// The client's retry policy's rule, for requests without a policy of their own when
    /// neither classifier is set.
    private let retryFailures: FailureClassifier

    init(origins: OriginRecords, budget: RetryBudget, policy: RetryPolicy, clientFailures: FailureClassifier?) {
        self.origins = origins
        self.budget = budget
        failures = budget.failureClassifier ?? clientFailures
        retryFailures = policy.failures(clientWide: nil)
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let failures = failures ?? request.retryPolicy?.failures(clientWide: nil) ?? retryFailures
        let record = origins.record(of: request, call)
        let response: Response<ResponseBody>
        do {
            response = try await next(request, call)
        } catch {
            if let outcome = AttemptOutcome(failure: error), outcome.wasSent, failures.isFailure(outcome) {
                record.budget { $0.recordFailure() }
            }
            throw error
        }
        if failures.isFailure(.answered(response.head)) {
            record.budget { $0.recordFailure() }
        } else {
            record.budget { $0.recordAnswer(budget) }
        }
        return response
    }
}
