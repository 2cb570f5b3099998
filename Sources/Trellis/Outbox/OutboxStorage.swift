public import Foundation
import HTTPTypes

/// Where an ``Outbox`` keeps its calls: durable storage that survives the process (Trellis's
/// are `TrellisSQLite`'s `SQLiteOutboxStorage`).
///
/// Each operation is atomic: it is done in full, or not at all, when the process dies in it.
public protocol OutboxStorage: Sendable {
    /// Stores `entry` (whose `id` is ignored) durably, unless the storage holds `limit`
    /// entries that are not dead letters already; returns the stored entry, with its `id`, or
    /// `nil` when full.
    func insert(_ entry: OutboxEntry, limit: Int) async throws -> OutboxEntry?

    /// Claims the earliest entry due at `now` whose lane has no earlier entry waiting or being
    /// delivered, and marks it as being delivered; `nil` when there is none.
    func claimNext(at now: Date) async throws -> OutboxEntry?

    /// Makes every entry marked as being delivered due again: the process that was delivering
    /// it died. Called when an outbox starts.
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

    /// When the earliest entry ``claimNext(at:)`` could claim is due (one whose lane has no
    /// earlier entry waiting or being delivered), if there is one.
    func nextDue() async throws -> Date?
}
