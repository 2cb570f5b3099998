import Foundation
import Logging
import NIOCore

/// An ``HTTPCacheStorage`` the user provides, as the cache's store: each operation within the
/// cache's time limit, a failure a miss (and a log line), a damaged entry a miss.
struct ProvidedCacheStore: CacheStore {
    let storage: any HTTPCacheStorage
    let timeLimit: Duration
    let logger: Logger

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

    /// `operation` on the storage within the time limit, or `nil` and a log line.
    private func attempt<Value: Sendable>(_ what: String, _ operation: @escaping @Sendable (any HTTPCacheStorage) async throws -> Value) async -> Value? {
        let storage = storage
        do {
            return try await withTimeLimit(timeLimit, on: SystemClock()) { try await operation(storage) }
        } catch {
            logger.warning("the HTTP cache's storage could not \(what) (\(error)); the call goes on as a miss")
            return nil
        }
    }
}
