public import Foundation
public import HTTPTypes

/// When and how a failed request is sent again.
///
/// A request is retried when it failed to connect or broke off, timed out, or got one of
/// ``retryableStatuses`` (408, 429, 500, 502, 503, 504), but not when the answer was not
/// valid HTTP, which the same server would give again. It is retried only when sending it
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
    /// Waits; `Task.sleep` unless a test injects its own clock.
    public var sleep: @Sendable (Duration) async throws -> Void
    /// The current time, for `Retry-After` given as a date.
    public var now: @Sendable () -> Date
    /// A random number in `0..<1`, for the jitter.
    public var random: @Sendable () -> Double

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
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.maximumRetries = max(0, maximumRetries)
        self.retryableStatuses = retryableStatuses
        self.retriesNonIdempotentMethods = retriesNonIdempotentMethods
        self.initialDelay = initialDelay
        self.multiplier = max(1, multiplier)
        self.maximumDelay = maximumDelay
        self.maximumTotalDelay = maximumTotalDelay
        self.jitter = min(1, max(0, jitter))
        self.sleep = sleep
        self.now = now
        self.random = random
    }

    /// No retries: the default of a ``Client``, as in Alamofire and URLSession. Its waits are
    /// the defaults, which an endpoint's `@Retry(maximumRetries:)` uses.
    public static let none = RetryPolicy(maximumRetries: 0)

    /// Two retries with the default waits.
    public static let standard = RetryPolicy()

    /// Whether `method` may be sent twice with the same effect (RFC 9110 section 9.2.2).
    public static func isIdempotent(_ method: HTTPRequest.Method) -> Bool {
        // A switch, not `contains` on an array literal: every call asks, some twice.
        switch method {
        case .get, .head, .put, .delete, .options, .trace, .query: true
        default: false
        }
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
        guard nonIdempotent || isIdempotent(request.method) else { return false }
        return request.body?.isReplayable ?? true
    }

    /// Whether a thrown error is worth another attempt: the connection failed or the attempt
    /// timed out. Cancellation, TLS, decoding, an answer that is not valid HTTP, a proxy's
    /// `407` and the client's own refusals are not.
    func isRetryable(_ error: any Error) -> Bool {
        switch error as? TrellisError {
        // A proxy's 407 is the proxy's answer about credentials, not a failure of the origin:
        // the transport has asked for credentials once already, and sending again gets the same.
        case .connectionFailed(let failure): !failure.isProtocolViolation && !ProxyErrors.isChallenge(error)
        case .timedOut: true
        default: false
        }
    }

    /// The wait before retry number `retry` (from 0), or `nil` when there should be none:
    /// `Retry-After` when the response has one, exponential backoff with jitter otherwise,
    /// and `nil` when either goes beyond the caps.
    func delay(beforeRetry retry: Int, after head: HTTPResponse?, waitedSoFar: Duration) -> Duration? {
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

/// `Retry-After` (RFC 9110 section 10.2.3): a number of seconds, or an HTTP date.
enum RetryAfter {
    static func delay(_ value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            // delay-seconds is digits only; a number too long for any integer is a very long wait.
            return .saturating(seconds: Double(trimmed) ?? .infinity)
        }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        let interval = date.timeIntervalSince(now)
        return .saturating(seconds: interval)
    }
}

/// HTTP dates (RFC 9110 section 5.6.7): the IMF-fixdate form servers send, and the two
/// obsolete forms recipients must still accept.
///
/// Parsed by hand rather than with `DateFormatter`: on Linux, Foundation's formatter traps on
/// some malformed input (found by the `fuzz-retry-after` harness), and a header is input from
/// the network.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let shortDays: Set<String> = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let longDays: Set<String> = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    static func parse(_ text: String) -> Date? {
        guard text.utf8.count <= 64, text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        // One space between the parts, as the grammar says: `Expires` with runs of spaces is
        // not a date (and so already expired), as browsers read it.
        var tokens = text.lowercased().split(separator: " ", omittingEmptySubsequences: false)
        guard let first = tokens.first else { return nil }
        if first.hasSuffix(",") {
            let day = first.dropLast()
            if tokens.count == 6, shortDays.contains(String(day)), tokens[5] == "gmt" {
                // Sun, 06 Nov 1994 08:49:37 GMT
                guard tokens[1].count == 2, tokens[3].count == 4 else { return nil }
                return date(year: tokens[3], month: tokens[2], day: tokens[1], time: tokens[4])
            }
            if tokens.count == 4, longDays.contains(String(day)), tokens[3] == "gmt" {
                // Sunday, 06-Nov-94 08:49:37 GMT
                let parts = tokens[1].split(separator: "-", omittingEmptySubsequences: false)
                guard parts.count == 3, parts[0].count == 2, parts[2].count == 2, let short = Int(parts[2]) else { return nil }
                // Two-digit years are read within 1970...2069.
                let year = short < 70 ? 2000 + short : 1900 + short
                return date(year: Substring(String(year)), month: parts[1], day: parts[0], time: tokens[2])
            }
            return nil
        }
        // Sun Nov  6 08:49:37 1994: a day of one digit is padded with a space.
        if tokens.count == 6, tokens[2].isEmpty, tokens[3].count == 1 { tokens.remove(at: 2) }
        guard tokens.count == 5, shortDays.contains(String(first)), (1...2).contains(tokens[2].count), tokens[4].count == 4 else { return nil }
        return date(year: tokens[4], month: tokens[1], day: tokens[2], time: tokens[3])
    }

    private static func date(year: Substring, month: Substring, day: Substring, time: Substring) -> Date? {
        guard year.allSatisfy(\.isASCIIDigit), day.allSatisfy(\.isASCIIDigit),
            let year = Int(year), let day = Int(day),
            let monthIndex = months.firstIndex(of: String(month))
        else { return nil }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCIIDigit) }),
            let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
            hour < 24, minute < 60, second < 61
        else { return nil }
        let month = monthIndex + 1
        guard day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (the civil-from-days
    /// inverse, counting from March so that the leap day ends a year).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension Character {
    /// 0 to 9, and no other digit of any script: what the numbers of header fields are made of.
    var isASCIIDigit: Bool { isASCII && isNumber }
}
