public import Foundation

/// Why a resilience policy, or a feature a fleet shares, refused a call before sending it
/// (``TrellisError/callRefused(_:)``).
public struct CallRefusal: Sendable, CustomStringConvertible {
    /// Which policy refused the call, and why.
    public enum Reason: Sendable, Equatable {
        /// The origin's circuit breaker is open after a run of failures.
        case circuitOpen
        /// The origin's circuit breaker is trying it again with probe calls, and this call
        /// was not one of them.
        case circuitProbing
        /// The call waited ``ConcurrencyLimit/maximumWait`` for one of the origin's calls in
        /// flight to end, or found as many waiting as the limit allows.
        case concurrencyLimit
        /// The origin asked for a pause (`Retry-After`, or the rate-limit reset field) longer
        /// than ``SharedBackoff/maximumWait``.
        case rateLimited
        /// The client's own ``RateLimit`` would have held the request longer than its
        /// ``RateLimit/maximumWait``.
        case rateLimit
        /// A feature the fleet shares through a storage (the ``HTTPCache`` in a storage you
        /// provide) found that storage failing, and its ``SharedStateSettings`` say to refuse
        /// calls then (``SharedStateFailure/refuseCalls``).
        case sharedStorageFailed
    }

    /// The method and URL of the call, redacted.
    public var request: String { RequestLog.summary(refused.request) }
    /// The call, kept so that its redacted summary is made only when someone reads it, and
    /// boxed so that copying the error is one retain: a refusal is meant to be cheap.
    private let refused: RefusedRequest
    /// The origin, `scheme://host:port`.
    public let origin: String
    /// Which policy refused the call.
    public let reason: Reason
    /// When the origin may be tried again, when the policy knows.
    public let retryAt: Date?
    /// What the policy saw, in words: "5 failures in a row", say.
    public let detail: String

    init(request: Request, origin: String, reason: Reason, retryAt: Date?, detail: String) {
        self.refused = RefusedRequest(request: request)
        self.origin = origin
        self.reason = reason
        self.retryAt = retryAt
        self.detail = detail
    }

    public var description: String {
        let what = switch reason {
        case .circuitOpen: "the circuit breaker of \(origin) is open (\(detail))"
        case .circuitProbing: "the circuit breaker of \(origin) is half open, and its probe calls are under way"
        case .concurrencyLimit: "the concurrency limit of \(origin) held it back (\(detail))"
        case .rateLimited: "\(origin) asked for a pause (\(detail))"
        case .rateLimit: "the client's rate limit held it back (\(detail))"
        case .sharedStorageFailed: "a storage the fleet shares failed (\(detail))"
        }
        let again = retryAt.map { date in
            let seconds = max(0, date.timeIntervalSinceNow)
            return "; it will be tried again at \(date.formatted(.iso8601)) (in \(String(format: "%.1f", seconds)) s)"
        } ?? ""
        return "\(request) was not sent: \(what)\(again)"
    }
}

/// A refused call's request, shared by every copy of its refusal.
private final class RefusedRequest: Sendable {
    let request: Request

    init(request: Request) {
        self.request = request
    }
}
