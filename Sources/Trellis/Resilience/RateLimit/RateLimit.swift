/// A client-side rate limit: at most ``requests`` requests per ``period`` to each origin (or
/// each key you name, such as an account), spaced evenly, so that the client keeps within an
/// API's quota instead of learning it from `429`s.
///
/// Requests are counted as they leave: each hop (a redirect too), each retry and each hedge
/// takes its turn, and a response served from the HTTP cache, or shared with a coalesced call,
/// takes none. The limit is a generic cell rate algorithm (a token bucket without a timer):
/// each request may go one ``period``/``requests`` after the previous one, or up to ``burst``
/// of them at once after a quiet spell. A request whose turn is less than ``maximumWait`` away
/// waits for it, holding its place in line; one further away fails at once with
/// ``TrellisError/callRefused(_:)``, naming the key and when it may go. Waits are taken on the
/// client's clock (``Client/Configuration-swift.struct/clock``).
///
/// With ``sharing``, the quota is one for every process that shares its store
/// (``RateLimitSharing``): a fleet of replicas keeps within an API's quota together.
///
/// The limit also learns from answers: one that says the quota is spent (`RateLimit` with
/// `r=0` or `remaining=0`, `RateLimit-Remaining: 0` or `X-RateLimit-Remaining: 0`) and when it
/// resets (`t=`, `reset=`, `RateLimit-Reset` or `X-RateLimit-Reset`, in seconds or as a Unix
/// time) holds the key's requests until then. A reset more than a day away is not believed.
///
/// ```swift
/// let client = Client(baseURL: url) {
///     // The API allows 50 requests a second per account, which each request names.
///     $0.resilience.rateLimit = RateLimit(requests: 50, per: .seconds(1), key: { request in
///         request.headerFields[HTTPField.Name("X-Account")!] ?? "no account"
///     })
/// }
/// ```
public struct RateLimit: Sendable {
    /// How many requests may go in each ``period``.
    public var requests: Int
    /// The span ``requests`` are counted over.
    public var period: Duration
    /// How many requests may go at once after a quiet spell, at least 1. Above 1, some spans of
    /// one ``period`` may see up to `burst - 1` more than ``requests``.
    public var burst: Int
    /// The longest a request waits for its turn; one that would wait longer is refused.
    public var maximumWait: Duration
    /// The key each request is counted under; `nil` counts each origin (`scheme://host:port`)
    /// apart. Requests with the same key share a quota.
    public var key: (@Sendable (Request) -> String)?
    /// How the quota is shared with other processes; `nil` keeps it in this process.
    public var sharing: RateLimitSharing?

    /// A limit of `requests` per `period`, each key counted apart.
    public init(
        requests: Int,
        per period: Duration,
        burst: Int = 1,
        maximumWait: Duration = .seconds(30),
        key: (@Sendable (Request) -> String)? = nil,
        sharing: RateLimitSharing? = nil
    ) {
        self.requests = max(1, requests)
        self.period = max(.nanoseconds(1), period)
        self.burst = max(1, burst)
        self.maximumWait = max(.zero, maximumWait)
        self.key = key
        self.sharing = sharing
    }

    /// The key `request` is counted under.
    func key(for request: Request) -> String { key?(request) ?? request.origin }

    /// The time between two requests at the steady rate.
    var interval: Duration { period / requests }
    /// How far ahead of the steady rate a burst may run.
    var tolerance: Duration { interval * (burst - 1) }
}

/// One key's turn, as the generic cell rate algorithm keeps it: the time the next request
/// would go at the steady rate.
struct RateLimitTurns: OriginState {
    /// When the next request is due at the steady rate; `nil` before the first.
    var theoreticalArrival: ContinuousClock.Instant?

    init(_ limit: RateLimit) {}

    func isIdle(_ limit: RateLimit, at now: ContinuousClock.Instant) -> Bool {
        theoreticalArrival.map { $0 <= now } ?? true
    }

    /// Takes a turn at `now`, unless it is more than `limit`'s longest wait away: how long to
    /// wait for it (zero when it is now), or `nil` (and no turn taken) when it is too far.
    mutating func take(at now: ContinuousClock.Instant, _ limit: RateLimit) -> (wait: Duration?, goesAt: ContinuousClock.Instant) {
        let arrival = max(theoreticalArrival ?? now, now)
        let goesAt = arrival - limit.tolerance
        let wait = max(.zero, goesAt - now)
        guard wait <= limit.maximumWait else { return (nil, goesAt) }
        theoreticalArrival = arrival + limit.interval
        return (wait, max(goesAt, now))
    }

    /// Holds every request until `until`, as an answer that said the quota is spent asks.
    mutating func hold(until: ContinuousClock.Instant, _ limit: RateLimit) {
        let arrival = until + limit.tolerance
        theoreticalArrival = max(theoreticalArrival ?? arrival, arrival)
    }
}
