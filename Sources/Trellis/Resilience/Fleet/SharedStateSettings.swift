/// How a process treats the storage a feature shares with the other processes of a fleet: how
/// long each operation on it may take, what calls do while it fails, and when it is tried
/// again. Every feature a fleet shares holds one: the policies' ``PauseSharing`` and
/// ``RateLimitSharing``, the ``HTTPCache`` in a storage you provide, and the access tokens'
/// storage in PostgreSQL (`PostgresAccessTokenStorage`). Trellis applies it the same way for
/// each, on the client's clock: an operation that takes longer than ``timeLimit`` has failed, a failure is
/// a ``ResilienceEvent/sharedStateFailed(origin:policy:detail:)`` event and a log line, and
/// the storage is left alone for ``retryStorageAfter``, while ``whenStorageFails`` says what
/// the calls do.
public struct SharedStateSettings: Sendable {
    /// The longest each operation on the storage may take; one that takes longer has failed.
    public var timeLimit: Duration
    /// What calls do while the storage fails.
    public var whenStorageFails: SharedStateFailure
    /// After the storage fails, how long the process goes without it before it tries again.
    public var retryStorageAfter: Duration

    /// Settings; `timeLimit` is at least a millisecond and `retryStorageAfter` at least zero.
    public init(
        timeLimit: Duration = .seconds(1),
        whenStorageFails: SharedStateFailure = .continueInProcess,
        retryStorageAfter: Duration = .seconds(1)
    ) {
        self.timeLimit = max(.milliseconds(1), timeLimit)
        self.whenStorageFails = whenStorageFails
        self.retryStorageAfter = max(.zero, retryStorageAfter)
    }
}

/// What a policy shared by a fleet of processes does while the store it shares through fails
/// (does not answer within its time limit, or answers with an error).
public enum SharedStateFailure: Sendable, Equatable {
    /// Go on with the process's own state, as if nothing were shared; an event
    /// (``ResilienceEvent/sharedStateFailed(origin:policy:detail:)``) and a log line say so.
    case continueInProcess
    /// Refuse the calls the policy decides on, with ``TrellisError/callRefused(_:)``.
    case refuseCalls
}
