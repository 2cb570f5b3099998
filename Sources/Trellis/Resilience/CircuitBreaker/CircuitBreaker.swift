import HTTPTypes

/// A circuit breaker per origin: after a run of failures the origin's circuit opens, and for
/// a cool-down every call to it fails at once with ``TrellisError/callRefused(_:)``, which
/// names the origin and when it will be tried again, instead of waiting on a server that is
/// down. After the cool-down a few probe calls go through; if they all answer, the circuit
/// closes, and if one fails, it opens for another cool-down.
///
/// A failure is what the breaker's ``failureClassifier`` counts, else the client's
/// (``Client/Configuration-swift.struct/Resilience-swift.struct/failureClassifier``), else
/// (``FailureClassifier/serverFailures``) an attempt that broke (no connection, a connection
/// that broke, a timeout, an answer that is not valid HTTP) or got one of ``failureStatuses``.
/// Any other answer counts as a success. Every attempt counts, retries included; one the
/// client refused before sending it teaches nothing about the origin and is not counted, and a
/// refused attempt is not retried. Each change of state is a ``ResilienceEvent``.
///
/// ```swift
/// let client = Client(baseURL: url) {
///     $0.resilience.circuitBreaker = CircuitBreaker(
///         opensAfter: .failureRate(0.5, minimumCalls: 20, window: .seconds(30)),
///         coolDown: .seconds(15)
///     )
/// }
/// ```
public struct CircuitBreaker: Sendable {
    /// When the circuit opens.
    public enum Trip: Sendable, Equatable {
        /// After this many failures in a row.
        case consecutiveFailures(Int)
        /// When at least this share of the attempts within the last `window` failed, once at
        /// least `minimumCalls` were made in it.
        case failureRate(Double, minimumCalls: Int, window: Duration)
    }

    /// When the circuit opens.
    public var trip: Trip
    /// How long an open circuit refuses calls before it lets probes through.
    public var coolDown: Duration
    /// How many probe calls must answer to close the circuit again; as many go at once.
    public var probes: Int
    /// The statuses that count as failures when no classifier is set: 500, 502, 503 and 504
    /// unless you say otherwise.
    public var failureStatuses: Set<Int>
    /// Which attempts count as failures, in place of the client's classifier and the
    /// ``failureStatuses``.
    public var failureClassifier: FailureClassifier?
    /// Shares the circuit's openings with the other processes of a fleet, as pauses in a
    /// ``SharedPauseStorage`` (a store of their own, not the shared backoff's): when this
    /// process's circuit opens, every process refuses calls to the origin for the cool-down.
    /// Each process still probes and closes its own circuit. `nil` (the default) keeps the
    /// circuit in this process.
    public var sharing: PauseSharing?

    /// 500, 502, 503 and 504: a server that is failing, not a request the server refused.
    public static let defaultFailureStatuses: Set<Int> = [500, 502, 503, 504]

    /// A breaker; by default it opens after 5 failures in a row, for 30 seconds, and closes
    /// after one probe answers.
    public init(
        opensAfter trip: Trip = .consecutiveFailures(5),
        coolDown: Duration = .seconds(30),
        probes: Int = 1,
        failureStatuses: Set<Int> = CircuitBreaker.defaultFailureStatuses,
        failureClassifier: FailureClassifier? = nil,
        sharing: PauseSharing? = nil
    ) {
        switch trip {
        case .consecutiveFailures(let count): self.trip = .consecutiveFailures(max(1, count))
        case .failureRate(let rate, let minimumCalls, let window):
            self.trip = .failureRate(min(1, max(0, rate)), minimumCalls: max(1, minimumCalls), window: max(.milliseconds(1), window))
        }
        self.coolDown = max(.zero, coolDown)
        self.probes = max(1, probes)
        self.failureStatuses = failureStatuses
        self.failureClassifier = failureClassifier
        self.sharing = sharing
    }
}

extension CircuitBreaker: FailureCountingPolicy {
    /// Broken attempts, answers that are not valid HTTP, and the ``failureStatuses``.
    var builtInFailures: FailureClassifier? { .server(failureStatuses) }
}
