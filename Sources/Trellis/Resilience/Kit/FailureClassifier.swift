import HTTPTypes

/// Which attempts count as failures: the one rule that retries, the retry budget, the circuit
/// breaker, hedging and the shared pause follow (Polly's `ShouldHandle`).
///
/// Set one for the whole client in ``Client/Configuration-swift.struct/Resilience-swift.struct/failureClassifier``,
/// and override it for one policy in that policy's own `failureClassifier`. A policy with
/// neither keeps its built-in rule, named in its documentation: retries and the budget use
/// ``transientFailures`` (from the retry policy's statuses), the breaker ``serverFailures``
/// (from its statuses), the shared pause the answers with its statuses, and hedging lets
/// every answer win.
///
/// ```swift
/// // A 409 counts too, for every policy: retried, taken from the budget, opening the breaker.
/// let client = Client(baseURL: url) {
///     $0.retry = .standard
///     $0.resilience.circuitBreaker = CircuitBreaker()
///     $0.resilience.failureClassifier = FailureClassifier.transientFailures.or(.statuses([409]))
/// }
/// ```
///
/// What each policy does with a failure:
/// - Retries send the call again (when it is idempotent and its body can be sent again).
/// - The retry budget takes a token; any other answer puts a share of one back.
/// - The circuit breaker counts it towards opening. An attempt that was not sent
///   (``AttemptOutcome/failed(_:wasSent:)`` with `false`) teaches it nothing about the origin,
///   and neither the breaker nor the budget counts it.
/// - Hedging: an answer that is a failure does not win while another attempt is still out.
///   A failed attempt never ends a hedged call while another is out, whatever the classifier.
/// - The shared pause: an answer that is a failure and names a wait (`Retry-After`, or the
///   pause's reset field) pauses every call to the origin.
public struct FailureClassifier: Sendable {
    private let decide: @Sendable (AttemptOutcome) -> Bool

    /// A classifier that counts an outcome as a failure when `isFailure` says so.
    public init(_ isFailure: @escaping @Sendable (AttemptOutcome) -> Bool) {
        decide = isFailure
    }

    /// Whether `outcome` is a failure.
    public func isFailure(_ outcome: AttemptOutcome) -> Bool { decide(outcome) }

    /// Counts an outcome as a failure when either classifier does.
    public func or(_ other: FailureClassifier) -> FailureClassifier {
        FailureClassifier { self.isFailure($0) || other.isFailure($0) }
    }

    /// Answers whose status is one of `statuses`; no failed attempt.
    public static func statuses(_ statuses: Set<Int>) -> FailureClassifier {
        FailureClassifier { outcome in
            guard case .answered(let head) = outcome else { return false }
            return statuses.contains(head.status.code)
        }
    }

    /// Attempts that broke (no connection, a connection that broke, a timeout) and answers
    /// whose status is one of `statuses`.
    ///
    /// A proxy's `407` is not a failure: it is the proxy asking for credentials, and says
    /// nothing of the origin. Nor are TLS and pinning failures (a configuration problem),
    /// cancellations, or the client's own refusals. An answer that is not valid HTTP counts
    /// only when `countingInvalidAnswers` is set: sending again gets the same answer, but it is
    /// a sign of a broken server.
    public static func brokenAttempts(or statuses: Set<Int> = [], countingInvalidAnswers: Bool = true) -> FailureClassifier {
        FailureClassifier { outcome in
            switch outcome {
            case .answered(let head): statuses.contains(head.status.code)
            case .failed(let error, _):
                switch error {
                case .connectionFailed(let failure):
                    (countingInvalidAnswers || !failure.isProtocolViolation) && !ProxyErrors.isChallenge(error)
                case .timedOut: true
                default: false
                }
            }
        }
    }

    /// The retry policy's rule unless you set one: broken attempts (not counting answers that
    /// are not valid HTTP, which would come again) and 408, 429, 500, 502, 503 and 504.
    public static let transientFailures = transient(RetryPolicy.defaultRetryableStatuses)

    /// The circuit breaker's rule unless you set one: broken attempts, answers that are not
    /// valid HTTP, and 500, 502, 503 and 504, a server that is failing rather than a request it
    /// refused.
    public static let serverFailures = server(CircuitBreaker.defaultFailureStatuses)

    /// The retry policy's rule for `statuses`: broken attempts, not counting answers that are
    /// not valid HTTP, and `statuses`.
    static func transient(_ statuses: Set<Int>) -> FailureClassifier {
        brokenAttempts(or: statuses, countingInvalidAnswers: false)
    }

    /// The circuit breaker's rule for `statuses`: broken attempts, answers that are not valid
    /// HTTP, and `statuses`.
    static func server(_ statuses: Set<Int>) -> FailureClassifier {
        brokenAttempts(or: statuses)
    }
}
