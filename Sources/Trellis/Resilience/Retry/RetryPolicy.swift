import Foundation
public import HTTPTypes

/// When and how a failed request is sent again.
///
/// A request is retried when its attempt is a failure: by default
/// (``FailureClassifier/transientFailures``) when it failed to connect or broke off, timed out,
/// or got one of ``retryableStatuses`` (408, 429, 500, 502, 503, 504), but not when the answer
/// was not valid HTTP, which the same server would give again; a ``failureClassifier`` of the
/// policy's own or the client's decides instead when there is one. It is retried only when sending it
/// again is safe: its method is idempotent (GET, HEAD, PUT, DELETE, OPTIONS, TRACE, QUERY) unless
/// ``retriesNonIdempotentMethods`` is set, and its body can be sent again (a one-shot stream
/// cannot). Waits grow exponentially with jitter, each capped by ``maximumDelay`` and all of
/// them by ``maximumTotalDelay``. A `Retry-After` header (seconds or an HTTP date) sets the
/// wait instead; one longer than the caps ends the retries and the response is returned as
/// it is. Cancelling the calling task ends a wait at once.
///
/// ```swift
/// let client = Client(baseURL: url) { $0.retry = RetryPolicy(maximumRetries: 3) }
///
/// @GET("/feed") @Retry(maximumRetries: 5)   // per endpoint
/// func feed() async throws -> Feed
/// ```
///
/// Each attempt goes down the per-hop stages again (redirects, credentials, the access token)
/// and gets the whole timeout of its own; middlewares of scope ``MiddlewareScope/call`` see
/// the call once.
public struct RetryPolicy: Sendable {
    /// How many times a request may be sent again after its first attempt (Yggdrasil's
    /// `retryCount`). Zero disables retrying.
    public var maximumRetries: Int
    /// The statuses that are retried.
    public var retryableStatuses: Set<Int>
    /// Whether POST, PATCH, CONNECT and unknown methods are retried too. Set it only for
    /// endpoints the server makes idempotent itself (an idempotency key, say).
    public var retriesNonIdempotentMethods: Bool
    /// The first wait, before jitter.
    public var initialDelay: Duration
    /// How much each wait grows over the previous one.
    public var multiplier: Double
    /// The longest single wait, `Retry-After` included.
    public var maximumDelay: Duration
    /// The longest the waits of one call may add up to.
    public var maximumTotalDelay: Duration
    /// The share of each wait that is random, from 0 (none) to 1 (anywhere between zero and
    /// the full wait), so that clients that failed together do not retry together.
    public var jitter: Double
    /// A random number in `0..<1`, for the jitter.
    public var random: @Sendable () -> Double
    /// Which attempts are retried, in place of the client's
    /// ``Client/Configuration-swift.struct/Resilience-swift.struct/failureClassifier``; with
    /// neither, the attempts that broke and the ``retryableStatuses``.
    public var failureClassifier: FailureClassifier?

    /// 408, 429, 500, 502, 503 and 504.
    public static let defaultRetryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// A policy; the defaults wait about 0.2 s, 0.4 s, 0.8 s… up to 30 s per wait and 60 s in
    /// all.
    public init(
        maximumRetries: Int = 2,
        retryableStatuses: Set<Int> = RetryPolicy.defaultRetryableStatuses,
        retriesNonIdempotentMethods: Bool = false,
        initialDelay: Duration = .milliseconds(200),
        multiplier: Double = 2,
        maximumDelay: Duration = .seconds(30),
        maximumTotalDelay: Duration = .seconds(60),
        jitter: Double = 0.5,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        failureClassifier: FailureClassifier? = nil
    ) {
        self.maximumRetries = max(0, maximumRetries)
        self.retryableStatuses = retryableStatuses
        self.retriesNonIdempotentMethods = retriesNonIdempotentMethods
        self.initialDelay = initialDelay
        self.multiplier = max(1, multiplier)
        self.maximumDelay = maximumDelay
        self.maximumTotalDelay = maximumTotalDelay
        self.jitter = min(1, max(0, jitter))
        self.random = random
        self.failureClassifier = failureClassifier
    }

    /// No retries: the default of a ``Client``, as in Alamofire and URLSession. Its waits are
    /// the defaults, which an endpoint's `@Retry(maximumRetries:)` uses.
    public static let none = RetryPolicy(maximumRetries: 0)

    /// Two retries with the default waits.
    public static let standard = RetryPolicy()

    /// Whether `method` may be sent twice with the same effect (RFC 9110 section 9.2.2).
    public static func isIdempotent(_ method: HTTPRequest.Method) -> Bool {
        method.isIdempotent
    }

    /// Whether `request` may be sent again at all, whatever went wrong, with the count
    /// `maximumRetries` in place of the policy's when it is given.
    func allowsRetrying(_ request: Request, maximumRetries: Int? = nil) -> Bool {
        Self.allowsRetrying(request, maximumRetries: maximumRetries ?? self.maximumRetries, nonIdempotent: retriesNonIdempotentMethods)
    }

    /// ``allowsRetrying(_:maximumRetries:)`` from the two settings it reads, which the retry
    /// stage keeps apart from the policy so that a call need not copy the policy to ask.
    static func allowsRetrying(_ request: Request, maximumRetries: Int, nonIdempotent: Bool) -> Bool {
        guard maximumRetries > 0 else { return false }
        return nonIdempotent ? request.body?.isReplayable ?? true : request.canBeSentAgain
    }


    /// The wait before retry number `retry` (from 0), or `nil` when there should be none:
    /// `Retry-After` when the response has one, exponential backoff with jitter otherwise,
    /// and `nil` when either goes beyond the caps. `now` reads a `Retry-After` date.
    func delay(beforeRetry retry: Int, after head: HTTPResponse?, waitedSoFar: Duration, now: @autoclosure () -> Date) -> Duration? {
        guard retry < maximumRetries else { return nil }
        let wait: Duration
        if let value = head?.headerFields[.retryAfter], let asked = RetryAfter.delay(value, now: now()) {
            guard asked <= maximumDelay else { return nil }
            wait = asked
        } else {
            // In seconds as a Double, capped before it becomes a Duration again: a hundred
            // doublings overflow any Duration.
            let growth = pow(multiplier, Double(retry))
            let full = min(initialDelay.inSeconds * growth, maximumDelay.inSeconds)
            wait = .saturating(seconds: full * (1 - jitter * random()))
        }
        guard waitedSoFar.inSeconds + wait.inSeconds <= maximumTotalDelay.inSeconds else { return nil }
        return wait
    }
}

extension RetryPolicy: FailureCountingPolicy {
    /// Broken attempts and the ``retryableStatuses``.
    var builtInFailures: FailureClassifier? { .transient(retryableStatuses) }
}
