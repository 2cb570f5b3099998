import NIOConcurrencyHelpers

/// After a storage a fleet shares failed, the time it is left alone
/// (``SharedStateSettings/retryStorageAfter``), and how it failed: for the features that reach
/// their storage on the caller's task rather than through a ``StoreAccess`` (the HTTP cache,
/// the access tokens' storage in PostgreSQL). (`package`: `TrellisPostgres` keeps one.)
package final class StorageFailureWindow: Sendable {
    private let failure = NIOLockedValueBox<(until: ContinuousClock.Instant, detail: String)?>(nil)

    package init() {}

    /// How the storage failed, while it is still left alone at `now`.
    package func failure(at now: ContinuousClock.Instant) -> String? {
        failure.withLockedValue { failure in
            guard let failure, failure.until > now else { return nil }
            return failure.detail
        }
    }

    /// The storage failed at `now`, as `detail` says: it is left alone for `span`.
    package func failed(_ detail: String, at now: ContinuousClock.Instant, for span: Duration) {
        failure.withLockedValue { $0 = (now + span, detail) }
    }
}
