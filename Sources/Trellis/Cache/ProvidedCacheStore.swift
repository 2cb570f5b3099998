import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// An ``HTTPCacheStorage`` the user provides, as the cache's store: a failure a miss (and a log
/// line), a damaged entry a miss, the operations of one call within one time limit on the
/// client's clock, and a storage that failed left alone for its ``SharedStateSettings``'s
/// `retryStorageAfter`.
///
/// A call's part in the cache is several operations (a lookup, the fleet's lock, a second
/// lookup under it, a store): each held to the limit alone, a database that does not answer
/// cost a cached call four limits. The cache stage gives each call one ``CallTime``; each
/// lookup and store spends from it (the lock's wait is the storage's own to bound), and once it
/// is spent the call's other operations are passed over at once (a miss, no lock, nothing
/// stored).
struct ProvidedCacheStore: CacheStore {
    let storage: any HTTPCacheStorage
    let settings: SharedStateSettings
    let logger: Logger
    let failures = StorageFailureWindow()

    /// The time left to the storage's operations of the call under way, when a call is.
    @TaskLocal static var callTime: CallTime?

    /// What is left of one call's time limit on the storage, on the client's clock, and how
    /// the storage failed in the call, if it did.
    final class CallTime: Sendable {
        let clock: any ClientClock
        private let state: NIOLockedValueBox<(left: Duration, failure: String?)>

        init(_ limit: Duration, on clock: any ClientClock) {
            self.clock = clock
            state = NIOLockedValueBox((limit, nil))
        }

        /// What is left.
        var remaining: Duration { state.withLockedValue { $0.left } }

        /// How the storage first failed in this call.
        var storageFailure: String? { state.withLockedValue { $0.failure } }

        /// Takes `spent` off what is left.
        func spend(_ spent: Duration) {
            state.withLockedValue { $0.left -= spent }
        }

        func storageFailed(_ detail: String) {
            state.withLockedValue { $0.failure = $0.failure ?? detail }
        }
    }

    func read(_ key: String) async -> (CachedResponse, ByteBuffer)? {
        guard let entry = await attempt("read \(key)", { try await $0.entry(for: key) }) ?? nil else { return nil }
        guard let head = try? JSONDecoder().decode(CachedResponse.self, from: entry.head) else { return nil }
        let body = ByteBuffer(data: entry.body)
        guard body.readableBytes == head.bodyLength, HTTPCache.digest(body) == head.bodyDigest else { return nil }
        return (head, body)
    }

    func write(_ key: String, _ entry: CachedResponse, body: ByteBuffer) async {
        guard let head = try? JSONEncoder().encode(entry) else { return }
        let stored = HTTPCacheEntry(head: head, body: Data(body.readableBytesView))
        _ = await attempt("store \(key)") { try await $0.store(stored, for: key) }
    }

    func remove(_ key: String) async {
        _ = await attempt("remove \(key)") { try await $0.removeEntry(for: key) }
    }

    func removeAll() async {
        _ = await attempt("remove every entry") { try await $0.removeAll() }
    }

    /// `operation` on the storage within what is left of the call's time limit (the whole
    /// limit outside a call), or `nil` and a log line; `nil` at once while the storage is left
    /// alone after a failure.
    private func attempt<Value: Sendable>(_ what: String, _ operation: @escaping @Sendable (any HTTPCacheStorage) async throws -> Value) async -> Value? {
        let storage = storage
        let callTime = Self.callTime
        let clock = callTime?.clock ?? SystemClock()
        if let failure = failures.failure(at: clock.instant) {
            callTime?.storageFailed("it failed (\(failure)) and is left alone for retryStorageAfter: \(settings.retryStorageAfter)")
            return nil
        }
        let limit = callTime.map { min(settings.timeLimit, $0.remaining) } ?? settings.timeLimit
        guard limit > .zero else {
            logger.warning("the HTTP cache's storage did not \(what): the call's \(settings.timeLimit) on the storage is spent; the call goes on as a miss")
            callTime?.storageFailed("the call's \(settings.timeLimit) on it is spent (timeLimit)")
            return nil
        }
        let start = clock.instant
        defer { callTime?.spend(start.duration(to: clock.instant)) }
        do {
            return try await withTimeLimit(limit, on: clock) { try await operation(storage) }
        } catch {
            logger.warning("the HTTP cache's storage could not \(what) (\(error)); \(settings.whenStorageFails == .refuseCalls ? "the call is refused" : "the call goes on as a miss")")
            failures.failed("\(error)", at: clock.instant, for: settings.retryStorageAfter)
            callTime?.storageFailed("it could not \(what): \(error)")
            return nil
        }
    }
}
