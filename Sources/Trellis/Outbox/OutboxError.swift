/// Why an ``Outbox`` did not take a call, or could not reach its storage. Nothing is lost: a
/// call refused at ``Outbox/enqueue(_:lane:)`` was never stored, and the entries stored before
/// are still there.
public struct OutboxError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Reason: Sendable, Equatable {
        /// The outbox holds ``OutboxSettings/maximumEntries`` calls already: back-pressure.
        case full
        /// The call's body is larger than ``OutboxSettings/maximumPayloadSize``.
        case payloadTooLarge
        /// The call's body is a stream, which cannot be stored to be sent again.
        case bodyCannotBeStored
        /// The storage failed: a file that is not an outbox, a full disk, a lock held too long.
        case storageFailed
    }

    /// What went wrong.
    public let reason: Reason
    /// The details, in words.
    public let detail: String

    /// An error for `reason`, with `detail`; a storage of your own throws one of
    /// ``Reason/storageFailed``.
    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "the outbox did not take the call: \(detail)" }
}
