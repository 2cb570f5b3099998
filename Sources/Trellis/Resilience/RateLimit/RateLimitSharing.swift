/// Where the turns of a ``RateLimit`` are kept when several processes share one quota: a
/// fleet of replicas that all call the same API, whose quota is the fleet's.
///
/// A store keeps one schedule per key: the time its next turn is due, as the generic cell
/// rate algorithm does within one process, on a database every process reaches: one statement
/// takes a batch of turns under the row's lock.
public protocol RateLimitStorage: Sendable {
    /// Takes the next `count` turns of `key`'s schedule under `limit`, for this process to
    /// use, and returns how long after this answer each may go (the first ones may be zero,
    /// after a quiet spell), in order. Turns taken are the caller's: the other processes get
    /// the turns after them.
    func takeTurns(_ count: Int, of key: String, under limit: RateLimit) async throws -> [Duration]

    /// Holds every turn of `key` until `duration` from now: an answer said the quota is spent
    /// until then.
    func hold(_ key: String, for duration: Duration, under limit: RateLimit) async throws
}

/// How a ``RateLimit`` shares its quota with other processes through a ``RateLimitStorage``.
///
/// Turns are taken from the store in batches of ``batch``, so that a request costs the store a
/// round trip only once per batch. What a batch costs in precision: a process's turns are
/// fixed in the fleet's schedule when it takes them, and one it uses late goes at once, beside
/// the turns the fleet is using then. A process holds at most one batch, so in any span of one
/// period the fleet sends at most ``RateLimit/requests`` plus one batch per process; and turns
/// a process took but has no calls for are idle for the rest of the fleet until it has.
///
/// ```swift
/// let store: any RateLimitStorage = accountQuotas   // on a database every process reaches
/// let client = Client(baseURL: url) {
///     $0.resilience.rateLimit = RateLimit(
///         requests: 100, per: .seconds(1),
///         sharing: RateLimitSharing(storage: store, batch: 5, whenStorageFails: .refuseCalls)
///     )
/// }
/// ```
public struct RateLimitSharing: Sendable {
    /// Where the fleet's turns are kept.
    public var storage: any RateLimitStorage
    /// How many turns a process takes from the store at a time, at least 1.
    public var batch: Int
    /// The storage's time limit, what requests do while it fails, and when it is tried again.
    public var settings: SharedStateSettings

    /// Sharing through `storage`, `batch` turns at a time; the other settings are those of
    /// ``SharedStateSettings``.
    public init(
        storage: any RateLimitStorage,
        batch: Int = 10,
        timeLimit: Duration = .seconds(1),
        whenStorageFails: SharedStateFailure = .continueInProcess,
        retryStorageAfter: Duration = .seconds(1)
    ) {
        self.storage = storage
        self.batch = max(1, batch)
        settings = SharedStateSettings(timeLimit: timeLimit, whenStorageFails: whenStorageFails, retryStorageAfter: retryStorageAfter)
    }
}
