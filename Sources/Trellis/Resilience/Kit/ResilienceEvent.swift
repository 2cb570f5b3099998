public import Foundation

/// What a resilience policy did (``Client/Configuration-swift.struct/resilience``), as event
/// monitors see it (``ClientEventMonitor/resilienceEvent(_:for:)``). Spans get it as an event
/// named after ``name``, and metrics count it in `trellis.resilience.events`, by ``name`` and
/// origin.
public enum ResilienceEvent: Sendable {
    /// A retry, or a hedge, was not sent: the origin's ``RetryBudget`` holds `tokens`, half
    /// its size or fewer.
    case retryRefusedByBudget(origin: String, tokens: Double)
    /// The origin's circuit opened after `detail` ("5 failures in a row"); calls are refused
    /// until `until`.
    case circuitOpened(origin: String, until: Date, detail: String)
    /// The origin's cool-down is over: the next calls are probes.
    case circuitHalfOpened(origin: String)
    /// The probe calls answered: the origin's circuit is closed again.
    case circuitClosed(origin: String)
    /// The origin has as many calls in flight as its ``ConcurrencyLimit`` allows: the call
    /// waits in line, behind `ahead` others.
    case concurrencyLimitReached(origin: String, ahead: Int)
    /// The origin answered `status` asking for a pause until `until`: calls to it wait until
    /// then.
    case backoffStarted(origin: String, status: Int, until: Date)
    /// The call waited for the origin's pause to end before it was sent.
    case waitedForBackoff(origin: String, until: Date)
    /// A hedge was sent: the first attempt had not answered after `after`.
    case hedgeSent(origin: String, after: Duration)
    /// The call joined an identical exchange in flight (the same request as sent) and shares
    /// its response.
    case coalesced(origin: String)
    /// The request waited for its turn under the client's ``RateLimit`` for `key`, until
    /// `until`.
    case waitedForRateLimit(origin: String, key: String, until: Date)
    /// An answer said `key`'s quota is spent until `until`: its requests wait, or are refused,
    /// until then.
    case rateLimitSpent(origin: String, key: String, until: Date)
    /// The store a policy shares with other processes failed (`detail` says how): the policy
    /// goes on with this process's own state, or refuses calls, as its setting says
    /// (``SharedStateFailure``). `policy` names it: `rate_limit`, `shared_backoff`, `circuit_breaker` or `http_cache`.
    case sharedStateFailed(origin: String, policy: String, detail: String)
    /// A policy refused the call before it was sent; the call fails with
    /// ``TrellisError/callRefused(_:)``.
    case callRefused(CallRefusal)

    /// The origin the event is about, `scheme://host:port`.
    public var origin: String {
        switch self {
        case .retryRefusedByBudget(let origin, _), .circuitOpened(let origin, _, _), .circuitHalfOpened(let origin),
            .circuitClosed(let origin), .concurrencyLimitReached(let origin, _), .backoffStarted(let origin, _, _),
            .waitedForBackoff(let origin, _), .hedgeSent(let origin, _), .coalesced(let origin),
            .waitedForRateLimit(let origin, _, _), .rateLimitSpent(let origin, _, _), .sharedStateFailed(let origin, _, _):
            origin
        case .callRefused(let refusal): refusal.origin
        }
    }

    /// The event's name in spans and metrics: `retry_refused_by_budget`, `circuit_opened`,
    /// `circuit_half_opened`, `circuit_closed`, `concurrency_limit_reached`,
    /// `backoff_started`, `waited_for_backoff`, `hedge_sent`, `coalesced`,
    /// `waited_for_rate_limit`, `rate_limit_spent`, `shared_state_failed` or `call_refused`.
    public var name: String {
        switch self {
        case .retryRefusedByBudget: "retry_refused_by_budget"
        case .circuitOpened: "circuit_opened"
        case .circuitHalfOpened: "circuit_half_opened"
        case .circuitClosed: "circuit_closed"
        case .concurrencyLimitReached: "concurrency_limit_reached"
        case .backoffStarted: "backoff_started"
        case .waitedForBackoff: "waited_for_backoff"
        case .hedgeSent: "hedge_sent"
        case .coalesced: "coalesced"
        case .waitedForRateLimit: "waited_for_rate_limit"
        case .rateLimitSpent: "rate_limit_spent"
        case .sharedStateFailed: "shared_state_failed"
        case .callRefused: "call_refused"
        }
    }
}
