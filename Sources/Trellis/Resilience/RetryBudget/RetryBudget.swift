/// A budget of retries per origin, with gRPC's retry throttling rules: when an origin's
/// calls keep failing, the client stops retrying them, so that retries do not multiply the
/// load on a server that is already struggling.
///
/// Each origin has a bucket of ``maximumTokens`` tokens, full at first. An attempt that is a
/// failure takes one token; an attempt that gets any other answer puts back ``tokenRatio`` of
/// one. Failures are what the budget's ``failureClassifier`` counts, else the client's
/// (``Client/Configuration-swift.struct/Resilience-swift.struct/failureClassifier``), else
/// what the retry policy retries (a retryable status, a broken connection, a timeout). An
/// attempt the client refused before sending it counts neither way.
/// While the bucket holds half its tokens or fewer, failed calls are not retried and calls are
/// not hedged (``Hedging``); they fail, or return their response, as they are. Each retry the
/// budget refuses is a ``ResilienceEvent/retryRefusedByBudget(origin:tokens:)``.
///
/// With the defaults (100 tokens, 0.1 back per answer), an origin that fails everything
/// allows about 50 failed attempts in all before retries stop, and retries resume after about
/// ten answers for each token missing above half.
///
/// ```swift
/// let client = Client(baseURL: url) {
///     $0.retry = .standard
///     $0.resilience.retryBudget = RetryBudget(maximumTokens: 10, tokenRatio: 0.1)
/// }
/// ```
public struct RetryBudget: Sendable {
    /// The bucket's size, from 1 to 1000, as gRPC allows.
    public var maximumTokens: Double
    /// What each answered attempt puts back, from 0 to 1.
    public var tokenRatio: Double
    /// Which attempts take a token, in place of the client's classifier and the retry
    /// policy's rule.
    public var failureClassifier: FailureClassifier?

    /// A budget; `maximumTokens` is held to 1...1000 and `tokenRatio` to 0...1.
    public init(maximumTokens: Double = 100, tokenRatio: Double = 0.1, failureClassifier: FailureClassifier? = nil) {
        self.maximumTokens = min(1000, max(1, maximumTokens))
        self.tokenRatio = min(1, max(0, tokenRatio))
        self.failureClassifier = failureClassifier
    }
}

extension RetryBudget: FailureCountingPolicy {
    /// None of its own: the budget counts what the call's retry policy retries.
    var builtInFailures: FailureClassifier? { nil }
}

/// One origin's bucket of retry tokens.
struct RetryTokens: OriginState {
    var tokens: Double

    init(_ budget: RetryBudget) { tokens = budget.maximumTokens }

    /// A full bucket is what a new origin gets, so forgetting it loses nothing.
    func isIdle(_ budget: RetryBudget, at now: ContinuousClock.Instant) -> Bool { tokens >= budget.maximumTokens }

    mutating func recordFailure() { tokens = max(0, tokens - 1) }

    mutating func recordAnswer(_ budget: RetryBudget) { tokens = min(budget.maximumTokens, tokens + budget.tokenRatio) }

    func allowsRetry(_ budget: RetryBudget) -> Bool { tokens > budget.maximumTokens / 2 }
}

extension OriginRecord {
    /// Whether the origin's budget allows a retry or a hedge now, and the tokens it holds.
    func retryAllowance(_ budget: RetryBudget) -> (allowed: Bool, tokens: Double) {
        withState(OriginStateKey<RetryTokens>(budget)) { ($0.allowsRetry(budget), $0.tokens) }
    }
}
