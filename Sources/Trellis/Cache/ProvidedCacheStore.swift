import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// An ``HTTPCacheStorage`` the user provides, as the cache's store: a failure a miss (and a log
/// line), a damaged entry a miss, and the operations of one call within one time limit.
///
/// A call's part in the cache is several operations (a lookup, the fleet's lock, a second
/// lookup under it, a store): each held to the limit alone, a database that does not answer
/// cost a cached call four limits. The cache stage gives each call one ``CallTime``; each
/// lookup and store spends from it (the lock's wait is the storage's own to bound), and once it
/// is spent the call's other operations are passed over at once (a miss, no lock, nothing
/// stored).
struct ProvidedCacheStore: CacheStore {
    let storage: any HTTPCacheStorage
    let timeLimit: Duration
    let logger: Logger

    /// The time left to the storage's operations of the call under way, when a call is.
    @TaskLocal static var callTime: CallTime?

    /// What is left of one call's time limit on the storage.
    final class CallTime: Sendable {
        private let left: NIOLockedValueBox<Duration>

        init(_ limit: Duration) {
            left = NIOLockedValueBox(limit)
        }

        /// What is left.
        var remaining: Duration { left.withLockedValue { $0 } }

        /// Takes `spent` off what is left.
        func spend(_ spent: Duration) {
            left.withLockedValue { $0 -= spent }
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
    /// limit outside a call), or `nil` and a log line.
    private func attempt<Value: Sendable>(_ what: String, _ operation: @escaping @Sendable (any HTTPCacheStorage) async throws -> Value) async -> Value? {
        let storage = storage
        let callTime = Self.callTime
        let limit = callTime.map { min(timeLimit, $0.remaining) } ?? timeLimit
        guard limit > .zero else {
            logger.warning("the HTTP cache's storage did not \(what): the call's \(timeLimit) on the storage is spent; the call goes on as a miss")
            return nil
        }
        let clock = ContinuousClock()
        let start = clock.now
        defer { callTime?.spend(start.duration(to: clock.now)) }
        do {
            return try await withTimeLimit(limit, on: SystemClock()) { try await operation(storage) }
        } catch {
            logger.warning("the HTTP cache's storage could not \(what) (\(error)); the call goes on as a miss")
            return nil
        }
    }
}
