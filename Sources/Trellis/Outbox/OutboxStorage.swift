public import Foundation
import HTTPTypes

/// Where an ``Outbox`` keeps its calls: durable storage that survives the process (Trellis's
/// are `TrellisSQLite`'s `SQLiteOutboxStorage`, for one process, and `TrellisPostgres`'s
/// `PostgresOutboxStorage`, which a fleet drains together).
///
/// Each operation is atomic: it is done in full, or not at all, when the process dies in it.
public protocol OutboxStorage: Sendable {
    /// Stores `entry` (whose `id` is ignored) durably, unless the storage holds `limit`
    /// entries that are not dead letters already; returns the stored entry, with its `id`, or
    /// `nil` when full.
    func insert(_ entry: OutboxEntry, limit: Int) async throws -> OutboxEntry?

    /// Claims the earliest entry due at `now` whose lane has no earlier entry waiting or being
    /// delivered, and marks it as being delivered for `lease`; `nil` when there is none. A
    /// storage several processes share also claims an entry whose claim's lease ran out (its
    /// process died); one that a single process uses may leave leases to ``releaseClaims()``.
    func claimNext(at now: Date, leaseFor lease: Duration) async throws -> OutboxEntry?

    /// Extends the leases of the claims `ids`, which this process is still delivering.
    func renewClaims(_ ids: [Int64], leaseFor lease: Duration) async throws

    /// Called when an outbox starts: a storage that one process uses at a time makes every
    /// entry marked as being delivered due again (the process that was delivering it died); a
    /// storage a fleet shares leaves the claims to their leases.
    func releaseClaims() async throws

    /// Removes a delivered entry.
    func delivered(_ id: Int64) async throws

    /// Makes an entry due again at `notBefore`, counting the failed attempt.
    func reschedule(_ id: Int64, notBefore: Date, failure: String) async throws

    /// Keeps an entry as a dead letter, with why, and the server's final answer if there was one.
    func deadLetter(_ id: Int64, reason: String, answer: Response<Data>?) async throws

    /// The entries waiting or being delivered, or the dead letters, in order.
    func entries(deadLetters: Bool) async throws -> [OutboxEntry]

    /// Removes an entry, whatever its state.
    func remove(_ id: Int64) async throws

    /// Makes a dead letter due again now, its attempts counted from zero.
    func revive(_ id: Int64) async throws

    /// When the earliest entry ``claimNext(at:leaseFor:)`` could claim is due, as of `now`
    /// (one whose lane has no earlier entry waiting or being delivered, or a claim whose lease
    /// runs out), if there is one.
    func nextDue(at now: Date) async throws -> Date?

    /// How often an outbox on this storage looks for calls it was not told of: those other
    /// processes enqueued, and the claims of a process that died. `nil`, for a storage one
    /// process uses: its outbox learns of each call as it is enqueued.
    var pollInterval: Duration? { get }
}

extension OutboxStorage {
    public var pollInterval: Duration? { nil }
}
