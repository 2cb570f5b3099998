import HTTPTypes

/// The call's retries, around everything that sends: each attempt goes down the rest of the
/// pipeline again (its time limits, redirects, credentials, the transport).
///
/// An attempt that breaks on a connection the server had already closed, before any byte of
/// the response, is sent once more at once when that is safe, as OkHttp and URLSession do,
/// whatever the retry policy.
struct RetryStage: Stage {
    let policy: RetryPolicy
    let context: PolicyContext
    /// The client's origin records, when a policy keeps state per origin: looked up here once
    /// per call for every policy.
    let origins: OriginRecords?
    /// The origins' retry budgets, if on, which must allow each retry.
    let budget: RetryBudget?
    /// What the client's policy retries, worked out once.
    private let failures: FailureClassifier

    /// The retries of `policy`; `looksUpOrigins` when a policy around each attempt keeps
    /// state per origin.
    init(policy: RetryPolicy, budget: RetryBudget? = nil, looksUpOrigins: Bool = false, context: PolicyContext) {
        self.policy = policy
        self.context = context
        self.budget = budget
        origins = looksUpOrigins || budget != nil ? context.origins : nil
        failures = context.failures(of: policy)!
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var call = call
        if let origins { call.originRecord = origins.record(for: request.origin) }
        let maximumRetries = request.maximumRetries
        let retries = request.retryPolicy.map { $0.allowsRetrying(request, maximumRetries: maximumRetries) }
            ?? RetryPolicy.allowsRetrying(
                request,
                maximumRetries: maximumRetries ?? self.policy.maximumRetries,
                nonIdempotent: self.policy.retriesNonIdempotentMethods
            )
        if !retries, !request.canBeSentAgain {
            // Nothing to retry and nothing to replay: one attempt, as it comes.
            return try await next(request, call)
        }
        var policy = request.retryPolicy ?? self.policy
        if let maximumRetries { policy.maximumRetries = maximumRetries }
        let failures = request.retryPolicy.flatMap(context.failures(of:)) ?? self.failures
        var replayedStaleConnection = false
        var replaysAfterLeftovers = 0
        var retry = 0
        var waited = Duration.zero
        while true {
            let wait: Duration
            do {
                let response = try await next(request, call)
                // A keyed call's 422 says its key was used for another request: sending it
                // again cannot help, whatever the classifier counts.
                guard retries, request.sentIdempotencyKey == nil || response.status.code != 422, failures.isFailure(.answered(response.head)),
                    let delay = policy.delay(beforeRetry: retry, after: response.head, waitedSoFar: waited, now: context.clock.now),
                    budgetAllows(request, call)
                else { return response }
                await response.body.discard()
                wait = delay
                context.logger.debug("\(RequestLog.summary(request)): \(response.status.code), retry \(retry + 1) in \(delay)")
                call.observation?.retryScheduled(retry: retry + 1, delay: delay, cause: .status(response.status), for: request)
            } catch {
                // Only sending throws in here: a connection that may have been stale broke
                // before any of a response came.
                if case TrellisError.connectionFailed(let failure) = error, failure.mayBeStaleConnection,
                    !replayedStaleConnection, request.canBeSentAgain
                {
                    replayedStaleConnection = true
                    context.logger.debug("\(RequestLog.summary(request)): \(error), sent again on a new connection")
                    continue
                }
                if case TrellisError.connectionFailed(let failure) = error, failure.failedOnReusedConnection,
                    replaysAfterLeftovers < Self.maximumReplaysAfterLeftovers, request.canBeSentAgain
                {
                    replaysAfterLeftovers += 1
                    context.logger.debug("\(RequestLog.summary(request)): \(error), sent again on another connection")
                    continue
                }
                guard retries, let outcome = AttemptOutcome(failure: error), failures.isFailure(outcome),
                    let delay = policy.delay(beforeRetry: retry, after: nil, waitedSoFar: waited, now: context.clock.now),
                    budgetAllows(request, call)
                else { throw error }
                wait = delay
                context.logger.debug("\(RequestLog.summary(request)): \(error), retry \(retry + 1) in \(delay)")
                call.observation?.retryScheduled(retry: retry + 1, delay: delay, cause: .error(error), for: request)
            }
            try await context.clock.sleep(for: wait)
            try Task.checkCancellation()
            waited += wait
            retry += 1
        }
    }

    /// Whether the origin's retry budget, if the client has one, allows another attempt; a
    /// refusal is reported.
    private func budgetAllows(_ request: Request, _ call: CallContext) -> Bool {
        guard let origins, let budget else { return true }
        let record = origins.record(of: request, call)
        let origin = record.origin
        let allowance = record.retryAllowance(budget)
        if !allowance.allowed {
            context.logger.debug("\(RequestLog.summary(request)): not retried, the retry budget of \(origin) is spent")
            context.report(.retryRefusedByBudget(origin: origin, tokens: allowance.tokens), request, call)
        }
        return allowance.allowed
    }

    /// How many times a request that broke on the bytes a previous answer left on its pooled
    /// connection is sent again: each such connection is closed as it fails, so a few tries
    /// reach a clean one even from a server that overruns every answer.
    static let maximumReplaysAfterLeftovers = 3
}
