public import Foundation

/// Where an ``HTTPCache`` keeps its responses when you provide the place: a database that a
/// fleet of processes shares, so that a response one process fetched is served to the others.
///
/// Entries are opaque to the storage: a head Trellis encoded (the URL, the status, the fields,
/// the times and what the response varies on) and the body. The storage bounds its own size and
/// evicts what it chooses, the least recently used first as Trellis's own stores do; Trellis
/// checks each body it reads against the digest in its head, so a damaged entry is a miss.
///
/// A storage that fails (or takes longer than the cache's time limit) is a miss: the call goes
/// to the network, and a log line says so.
public protocol HTTPCacheStorage: Sendable {
    /// The entry stored under `key`, if any; reading it counts as a use for eviction.
    func entry(for key: String) async throws -> HTTPCacheEntry?
    /// Stores `entry` under `key`, replacing what was there, and evicts past the storage's
    /// capacity.
    func store(_ entry: HTTPCacheEntry, for key: String) async throws
    /// Removes the entry under `key`; removing a missing entry is not an error.
    func removeEntry(for key: String) async throws
    /// Removes every entry.
    func removeAll() async throws
    /// Runs `fetch` while holding the fleet's lock on fetching `key`, so that processes that
    /// miss at once fetch once: the others wait for the lock, then find the stored entry. The
    /// default runs `fetch` at once; a storage that cannot take the lock within its limits
    /// runs it without.
    func fetchingOnce<Result: Sendable>(_ key: String, _ fetch: () async throws -> Result) async throws -> Result
}

extension HTTPCacheStorage {
    public func fetchingOnce<Result: Sendable>(_ key: String, _ fetch: () async throws -> Result) async throws -> Result {
        try await fetch()
    }
}

/// One stored response, as an ``HTTPCacheStorage`` keeps it.
public struct HTTPCacheEntry: Sendable, Hashable {
    /// The response's head and what Trellis knows of it, encoded by Trellis; opaque to the
    /// storage.
    public var head: Data
    /// The response's body.
    public var body: Data

    /// An entry of `head` and `body`.
    public init(head: Data, body: Data) {
        self.head = head
        self.body = body
    }

    /// The bytes the entry holds, for a storage's capacity.
    public var size: Int { head.count + body.count }
}
