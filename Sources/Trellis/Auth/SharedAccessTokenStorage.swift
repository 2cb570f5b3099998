/// An ``AccessTokenStorage`` that several processes share, in which a label's token is
/// refreshed by one process at a time: the fleet refreshes once per expiry, however many
/// processes find the token expired or refused.
///
/// Within a process, Trellis already runs one refresh per label at a time. When the client's
/// storage is shared, that refresh runs through ``refreshOnce(_:_:)``: the storage takes the
/// fleet's lock on the label, reads the token stored now and gives it to the refresh. Trellis
/// refreshes only when that token is still the one the caller found wanting (or has expired
/// itself); otherwise it returns the token another process stored while this one waited. An
/// authorization server that rotates refresh tokens, each usable once, then never sees one used
/// twice.
///
/// `TrellisPostgres`'s `PostgresAccessTokenStorage` is one, with a PostgreSQL advisory lock.
public protocol SharedAccessTokenStorage: AccessTokenStorage {
    /// Runs `refresh` while holding the lock every process of the fleet takes to refresh
    /// `label`'s token, and returns what it returns.
    ///
    /// `refresh` is given the token stored under `label` when the lock was taken (read from the
    /// shared store, not from a copy this process keeps). When it returns a token that
    /// differs from that one, the storage stores it before the lock
    /// is released, so the next process to take the lock reads it. A storage that cannot take
    /// the lock throws (or, when its user said so, refreshes without it); it never waits
    /// without limit.
    func refreshOnce(
        _ label: String,
        _ refresh: @escaping @Sendable (_ stored: AccessToken?) async throws -> AccessToken
    ) async throws -> AccessToken
}

/// The deadline of the call a task works for, when it works for one: a token refresh's task
/// carries the attempt's deadline of the call that started it, so that a storage a fleet
/// shares waits for another process's refresh as long as that call allows, and no longer.
/// (`package`: `TrellisPostgres` reads it.)
package enum CallDeadline {
    @TaskLocal package static var current: ContinuousClock.Instant?
}
