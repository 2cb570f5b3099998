/// The limits of an ``Outbox`` and how it delivers.
public struct OutboxSettings: Sendable {
    /// The most calls it holds, dead letters apart; an ``Outbox/enqueue(_:lane:)`` past it fails
    /// with ``OutboxError/Reason/full``. 10,000 unless you say otherwise.
    public var maximumEntries: Int
    /// The largest body it stores, in bytes. 1 MiB unless you say otherwise.
    public var maximumPayloadSize: Int
    /// After this many failed deliveries a call is a dead letter. 20 unless you say otherwise.
    public var maximumAttempts: Int
    /// A call older than this is a dead letter rather than sent again. A day unless you say
    /// otherwise.
    public var maximumAge: Duration
    /// The wait after the first failed delivery, doubled after each until ``maximumDelay``.
    public var initialDelay: Duration
    /// The longest wait between two deliveries of a call. Five minutes unless you say otherwise.
    public var maximumDelay: Duration
    /// How many calls are delivered at once, each in a lane of its own.
    public var concurrency: Int
    /// How long a claim on a call holds it for the process delivering it, in a storage a fleet
    /// shares: renewed every third of it while the delivery lasts, so a process that dies
    /// leaves its calls to the others once it has run out. 30 seconds unless you say otherwise.
    public var claimLease: Duration

    /// Settings; each limit is at least 1 (a millisecond for durations).
    public init(
        maximumEntries: Int = 10_000,
        maximumPayloadSize: Int = 1 << 20,
        maximumAttempts: Int = 20,
        maximumAge: Duration = .seconds(86_400),
        initialDelay: Duration = .seconds(1),
        maximumDelay: Duration = .seconds(300),
        concurrency: Int = 4,
        claimLease: Duration = .seconds(30)
    ) {
        self.maximumEntries = max(1, maximumEntries)
        self.maximumPayloadSize = max(1, maximumPayloadSize)
        self.maximumAttempts = max(1, maximumAttempts)
        self.maximumAge = max(.milliseconds(1), maximumAge)
        self.initialDelay = max(.milliseconds(1), initialDelay)
        self.maximumDelay = max(self.initialDelay, maximumDelay)
        self.concurrency = max(1, concurrency)
        self.claimLease = max(.milliseconds(3), claimLease)
    }
}
