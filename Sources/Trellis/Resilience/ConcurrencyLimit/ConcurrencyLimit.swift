/// A bulkhead per origin: at most ``maximumInFlight`` attempts in flight to each origin. The
/// rest wait their turn, first come first served; a call that waits longer than
/// ``maximumWait``, or finds ``maximumWaiting`` calls waiting already, fails with
/// ``TrellisError/callRefused(_:)``, and nothing is sent.
///
/// An attempt is in flight from when it is sent until its response head arrives and, for a
/// buffered call, until its whole body has. Waits for a retry do not hold a place, and a
/// streamed body (a download, an event stream) no longer does once its head has come.
///
/// ```swift
/// let client = Client(baseURL: url) {
///     $0.resilience.concurrencyLimit = ConcurrencyLimit(maximumInFlight: 4, maximumWait: .seconds(5))
/// }
/// ```
public struct ConcurrencyLimit: Sendable {
    /// The most attempts in flight to one origin, at least 1.
    public var maximumInFlight: Int
    /// The longest a call waits for its turn.
    public var maximumWait: Duration
    /// The most calls that wait for one origin; one more is refused at once.
    public var maximumWaiting: Int

    /// A limit of `maximumInFlight` per origin.
    public init(maximumInFlight: Int, maximumWait: Duration = .seconds(30), maximumWaiting: Int = 10_000) {
        self.maximumInFlight = max(1, maximumInFlight)
        self.maximumWait = max(.zero, maximumWait)
        self.maximumWaiting = max(0, maximumWaiting)
    }
}
