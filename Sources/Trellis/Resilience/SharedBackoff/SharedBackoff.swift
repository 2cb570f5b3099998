import Foundation
public import HTTPTypes

/// Backoff shared by every call to an origin: when the origin answers one call with a
/// ``statuses`` status (`429 Too Many Requests` or `503 Service Unavailable`), or with an
/// answer the pause's ``failureClassifier`` or the client's
/// (``Client/Configuration-swift.struct/Resilience-swift.struct/failureClassifier``) counts as a
/// failure when one is set, and says how long to wait (`Retry-After`, or the rate-limit reset field you name), every call to that
/// origin waits until then before it is sent, instead of the next hundred calls hitting it
/// at once. Retries wait too.
///
/// A call that would wait longer than ``maximumWait`` fails at once with
/// ``TrellisError/callRefused(_:)``, naming the origin and when the pause ends. The response
/// that asked for the pause is returned to its caller as it is (and retried, when the retry
/// policy says so).
///
/// ```swift
/// let client = Client(baseURL: url) {
///     $0.resilience.sharedBackoff = SharedBackoff(
///         resetField: RateLimitReset(HTTPField.Name("X-RateLimit-Reset")!, meaning: .unixTime)
///     )
/// }
/// ```
public struct SharedBackoff: Sendable {
    /// The statuses whose pause is shared when no classifier is set: 429 and 503 unless you
    /// say otherwise.
    public var statuses: Set<Int>
    /// Which answers' pauses are shared, in place of the client's classifier and the
    /// ``statuses``.
    public var failureClassifier: FailureClassifier?
    /// A field that says when a rate limit resets, read when `Retry-After` is absent.
    public var resetField: RateLimitReset?
    /// The longest a call waits for a pause to end; a longer pause refuses calls at once.
    public var maximumWait: Duration
    /// Shares the pauses with the other processes of a fleet through a store, so that a
    /// `Retry-After` one process is told pauses them all; `nil` (the default) keeps them in
    /// this process.
    public var sharing: PauseSharing?

    /// Shared backoff for `statuses`, waiting at most `maximumWait`.
    public init(
        statuses: Set<Int> = [429, 503],
        resetField: RateLimitReset? = nil,
        maximumWait: Duration = .seconds(60),
        failureClassifier: FailureClassifier? = nil,
        sharing: PauseSharing? = nil
    ) {
        self.statuses = statuses
        self.resetField = resetField
        self.maximumWait = max(.zero, maximumWait)
        self.failureClassifier = failureClassifier
        self.sharing = sharing
    }

    /// The pause `head` asks for, when `failures` counts it as a failure and it names one;
    /// `now` reads dates and reset times.
    func pause(askedBy head: HTTPResponse, failures: FailureClassifier, now: @autoclosure () -> Date) -> Duration? {
        guard failures.isFailure(.answered(head)) else { return nil }
        if let value = head.headerFields[.retryAfter], let delay = RetryAfter.delay(value, now: now()) {
            return delay > .zero ? delay : nil
        }
        guard let resetField, let value = head.headerFields[resetField.field],
            let number = Double(value.trimmingCharacters(in: .whitespaces)), number.isFinite
        else { return nil }
        let seconds = switch resetField.meaning {
        case .secondsFromNow: number
        case .unixTime: number - now().timeIntervalSince1970
        }
        return seconds > 0 ? .saturating(seconds: seconds) : nil
    }
}

extension SharedBackoff: FailureCountingPolicy {
    /// The answers with one of the ``statuses``.
    var builtInFailures: FailureClassifier? { .statuses(statuses) }
}

/// A response field that says when a rate limit resets (GitHub's `X-RateLimit-Reset`, the
/// IETF draft's `RateLimit-Reset`), for ``SharedBackoff``.
public struct RateLimitReset: Sendable {
    /// How the field's number reads.
    public enum Meaning: Sendable {
        /// Seconds from now, as `Retry-After` and the IETF draft's `RateLimit-Reset` count.
        case secondsFromNow
        /// Seconds since 1970-01-01 UTC, as GitHub's `X-RateLimit-Reset` counts.
        case unixTime
    }

    /// The field's name.
    public var field: HTTPField.Name
    /// How its number reads.
    public var meaning: Meaning

    /// The field `field`, read as `meaning` says.
    public init(_ field: HTTPField.Name, meaning: Meaning) {
        self.field = field
        self.meaning = meaning
    }
}

/// One origin's pause: when calls to it may go again.
struct BackoffPause: OriginState {
    var until: ContinuousClock.Instant?

    init(_ backoff: SharedBackoff) {}

    func isIdle(_ backoff: SharedBackoff, at now: ContinuousClock.Instant) -> Bool { until.map { $0 <= now } ?? true }
}
