/// Counts each attempt sent against its origin's ``RetryBudget``: one that fails the way the
/// retry policy retries takes a token, any other answer puts a share of one back. The retry
/// and hedging stages ask the budget before they send another attempt.
struct RetryBudgetStage: Stage {
    let budgets: OriginStates<RetryTokens>
    /// The client's retry policy, whose statuses and errors count as failures unless the
    /// request has its own.
    let policy: RetryPolicy

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let policy = request.retryPolicy ?? self.policy
        let budget = budgets.settings
        let origin = request.origin
        let response: Response<ResponseBody>
        do {
            response = try await next(request, call)
        } catch {
            if policy.isRetryable(error) { budgets.update(origin) { $0.recordFailure() } }
            throw error
        }
        if policy.retryableStatuses.contains(response.status.code) {
            budgets.update(origin) { $0.recordFailure() }
        } else {
            budgets.update(origin) { $0.recordAnswer(budget) }
        }
        return response
    }
}
