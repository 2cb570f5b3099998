/// Where the pauses of a ``SharedBackoff`` are kept when a fleet of processes shares them: a
/// `Retry-After` one replica is told pauses every replica's calls to that origin.
///
/// A store keeps one pause per origin (`scheme://host:port`): when calls to it may go again,
/// on the store's clock, so that the processes' own clocks need not agree.
public protocol SharedPauseStorage: Sendable {
    /// Pauses every process's calls to `origin` for `duration` from now; a pause already there
    /// that ends later stays.
    func pause(_ origin: String, for duration: Duration) async throws

    /// The pauses in force now: each paused origin, and how long its pause has left.
    func pauses() async throws -> [String: Duration]
}

/// How a ``SharedBackoff`` shares its pauses with other processes through a
/// ``SharedPauseStorage``.
///
/// A process tells the store of each pause it is asked for, and reads the fleet's pauses at
/// most once every ``readEvery``, on the call that finds its last reading older; the callers
/// meanwhile wait for that one reading together. So a call costs no round trip, and a pause one
/// process learns holds the others' calls from their next reading on, at most ``readEvery``
/// later.
///
/// ```swift
/// let pauses: any SharedPauseStorage = fleetPauses   // on a database every process reaches
/// let client = Client(baseURL: url) {
///     $0.resilience.sharedBackoff = SharedBackoff(sharing: PauseSharing(storage: pauses))
/// }
/// ```
public struct PauseSharing: Sendable {
    /// Where the fleet's pauses are kept.
    public var storage: any SharedPauseStorage
    /// How old a reading of the fleet's pauses may be before a call reads them again.
    public var readEvery: Duration
    /// The storage's time limit, what calls do while it fails (go on with this process's own
    /// pauses, or be refused), and when it is tried again.
    public var settings: SharedStateSettings

    /// Sharing through `storage`, read at most every `readEvery`; the other settings are those
    /// of ``SharedStateSettings``.
    public init(
        storage: any SharedPauseStorage,
        readEvery: Duration = .milliseconds(250),
        timeLimit: Duration = .seconds(1),
        whenStorageFails: SharedStateFailure = .continueInProcess,
        retryStorageAfter: Duration = .seconds(1)
    ) {
        self.storage = storage
        self.readEvery = max(.zero, readEvery)
        settings = SharedStateSettings(timeLimit: timeLimit, whenStorageFails: whenStorageFails, retryStorageAfter: retryStorageAfter)
    }
}
