public import Foundation
public import Logging
import Crypto
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore

/// A private HTTP cache (RFC 9111) for a ``Client``: responses to `GET` kept in memory, in a
/// folder or in a storage you provide (``HTTPCacheStorage``), served without the network while fresh and revalidated with the server
/// (`If-None-Match`, `If-Modified-Since`) once stale.
///
/// Off by default; one setting turns it on:
///
/// ```swift
/// let client = Client(baseURL: url) { $0.cache = HTTPCache(memoryCapacity: 16 << 20) }
/// let kept = Client(baseURL: url) { $0.cache = try? HTTPCache(directory: cachesFolder) }
/// ```
///
/// Only buffered calls use it (a download streams to its own file); a body larger than
/// ``maximumEntrySize`` is not stored. Both stores evict the least recently used entries past
/// their capacity.
///
/// Freshness is judged by the clock of the client that uses the cache
/// (``Client/Configuration-swift.struct/clock``); a test that needs a response to stay fresh,
/// or to go stale, gives the client a `ManualClock` rather than waiting.
public final class HTTPCache: Sendable {
    /// The largest body stored.
    public let maximumEntrySize: Int
    private let store: any CacheStore
    /// The storage the user provided, whose lock makes a fleet's misses one fetch.
    private let storage: (any HTTPCacheStorage)?
    /// How the cache meets ``storage``: the time limit of a call's operations on it, all of
    /// them together, what a call does while it fails, and how long it is left alone then.
    private let storageSettings: SharedStateSettings?

    /// A cache in memory of at most `memoryCapacity` bytes: each entry counts its body, its
    /// head and its URL.
    public init(
        memoryCapacity: Int = 16 << 20,
        maximumEntrySize: Int = 4 << 20
    ) {
        self.store = MemoryCacheStore(capacity: memoryCapacity)
        self.storage = nil
        self.storageSettings = nil
        self.maximumEntrySize = maximumEntrySize
    }

    /// A cache in `directory` (made, readable by its owner alone, when missing) of at most
    /// `capacity` bytes, which outlives the process and may be shared by clients and
    /// processes. Each entry is one file, written whole under another name and renamed into
    /// place, and checked against its SHA-256 when read: a crash or a concurrent writer never
    /// leaves a part of an entry that would be served.
    ///
    /// - Throws: ``TrellisError/fileFailed(_:)`` when the directory cannot be made.
    public init(
        directory: URL,
        capacity: Int = 64 << 20,
        maximumEntrySize: Int = 4 << 20
    ) throws {
        self.store = try DiskCacheStore(directory: directory, capacity: capacity)
        self.storage = nil
        self.storageSettings = nil
        self.maximumEntrySize = maximumEntrySize
    }

    /// A cache in `storage`, a place you provide (a database a fleet of processes shares; see
    /// ``HTTPCacheStorage``). A call's lookups and store on it have `timeLimit` together; one
    /// that fails, or runs past what is left of it, is a miss, and `logger` says so. Once a
    /// call has spent the limit, it takes no lock of a storage a fleet shares (whose wait the
    /// storage bounds itself) and stores nothing. The storage bounds its own size.
    ///
    /// The storage is met as every feature a fleet shares meets its storage
    /// (``SharedStateSettings``), on the client's clock: a call whose lookup finds it failing
    /// goes on as a miss, or, with `whenStorageFails: .refuseCalls`, is refused
    /// (``CallRefusal/Reason-swift.enum/sharedStorageFailed``) rather than sent to an origin the
    /// cache was there to spare; after a failure, the storage is left alone for
    /// `retryStorageAfter` (zero by default: every call asks it again).
    public init(
        storage: any HTTPCacheStorage,
        maximumEntrySize: Int = 4 << 20,
        timeLimit: Duration = .seconds(1),
        whenStorageFails: SharedStateFailure = .continueInProcess,
        retryStorageAfter: Duration = .zero,
        logger: Logger = Logger(label: "Trellis")
    ) {
        let settings = SharedStateSettings(timeLimit: timeLimit, whenStorageFails: whenStorageFails, retryStorageAfter: retryStorageAfter)
        self.store = ProvidedCacheStore(storage: storage, settings: settings, logger: logger)
        self.storage = storage
        self.storageSettings = settings
        self.maximumEntrySize = maximumEntrySize
    }

    /// Removes every stored response.
    public func removeAll() async {
        await store.removeAll()
    }

    /// The entry stored for `key`, unless its body is not what its head says it is: a body
    /// under `Content-Encoding: gzip` that is no gzip stream was stored decoded by a client
    /// that did not say so (a Trellis before the transports' heads told the truth, in a storage
    /// a fleet shares), and is removed rather than served.
    func lookup(_ key: String) async -> (CachedResponse, ByteBuffer)? {
        guard let found = await store.read(key) else { return nil }
        guard Self.bodyIsInItsCoding(found.1, head: found.0.head) else {
            await store.remove(key)
            return nil
        }
        return found
    }

    /// Whether `body` starts as the coding `head` names says it must: gzip's magic number, or a
    /// zlib header for `deflate`. Any other coding, and an empty body, pass.
    static func bodyIsInItsCoding(_ body: ByteBuffer, head: HTTPResponse) -> Bool {
        guard let coding = head.headerFields[.contentEncoding]?.trimmingCharacters(in: .whitespaces).lowercased(),
            let first = body.getInteger(at: body.readerIndex, as: UInt8.self),
            let second = body.getInteger(at: body.readerIndex + 1, as: UInt8.self)
        else { return true }
        switch coding {
        case "gzip", "x-gzip": return first == 0x1F && second == 0x8B
        case "deflate": return first & 0x0F == 8 && (UInt16(first) << 8 | UInt16(second)) % 31 == 0
        default: return true
        }
    }

    func save(_ key: String, _ entry: CachedResponse, body: ByteBuffer) async {
        await store.write(key, entry, body: body)
    }

    func remove(_ key: String) async {
        await store.remove(key)
    }

    /// Whether the responses are in a storage the user provided, which a fleet may share.
    var isShared: Bool { storage != nil }

    /// `fetch`, under the storage's lock on `key` when the storage is one a fleet shares and
    /// the call's time on it is not spent.
    func fetchingOnce<Result: Sendable>(_ key: String, _ fetch: () async throws -> Result) async throws -> Result {
        guard let storage, ProvidedCacheStore.callTime.map({ $0.remaining > .zero }) ?? true else { return try await fetch() }
        return try await storage.fetchingOnce(key, fetch)
    }

    /// `body`, the cache's part of one call: with a storage you provide, its operations share
    /// one time limit on `clock`, the client's (see `ProvidedCacheStore`).
    func withinOneTimeLimit<Result>(on clock: any ClientClock, _ body: () async throws -> Result) async rethrows -> Result {
        guard let settings = storageSettings else { return try await body() }
        return try await SharedStateClock.$current.withValue(clock) {
            try await ProvidedCacheStore.$callTime.withValue(ProvidedCacheStore.CallTime(settings.timeLimit, on: clock), operation: body)
        }
    }

    /// How the storage failed in the call under way, when its settings say that such a call
    /// is refused.
    func storageFailureRefusingTheCall() -> String? {
        guard storageSettings?.whenStorageFails == .refuseCalls else { return nil }
        return ProvidedCacheStore.callTime?.storageFailure
    }

    static func digest(_ body: ByteBuffer) -> String {
        hex(SHA256.hash(data: body.readableBytesView))
    }

    /// Lowercase hexadecimal, in one allocation (a `String(format:)` per byte made storing a
    /// response cost 30 more).
    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

protocol CacheStore: Sendable {
    func read(_ key: String) async -> (CachedResponse, ByteBuffer)?
    func write(_ key: String, _ entry: CachedResponse, body: ByteBuffer) async
    func remove(_ key: String) async
    func removeAll() async
}

/// Entries in memory, the least recently used evicted first.
final class MemoryCacheStore: CacheStore {
    private struct Entry {
        var response: CachedResponse
        var body: ByteBuffer
        var lastUse: UInt64
        /// What the entry holds in bytes, its head and key as well as its body: a server can
        /// send 48 KB of headers with a 1-byte body, and a capacity that counted bodies alone
        /// would keep any number of those.
        let size: Int

        init(response: CachedResponse, body: ByteBuffer, lastUse: UInt64, key: String) {
            self.response = response
            self.body = body
            self.lastUse = lastUse
            self.size = key.utf8.count + body.readableBytes + response.headSize
        }
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var size = 0
        var clock: UInt64 = 0
    }

    private let capacity: Int
    private let state = NIOLockedValueBox(State())

    init(capacity: Int) {
        self.capacity = capacity
    }

    func read(_ key: String) async -> (CachedResponse, ByteBuffer)? {
        state.withLockedValue { state in
            guard var entry = state.entries[key] else { return nil }
            state.clock += 1
            entry.lastUse = state.clock
            state.entries[key] = entry
            return (entry.response, entry.body)
        }
    }

    func write(_ key: String, _ entry: CachedResponse, body: ByteBuffer) async {
        state.withLockedValue { state in
            if let old = state.entries.removeValue(forKey: key) { state.size -= old.size }
            let stored = Entry(response: entry, body: body, lastUse: state.clock + 1, key: key)
            guard stored.size <= capacity else { return }
            state.clock += 1
            state.entries[key] = stored
            state.size += stored.size
            while state.size > capacity, let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                state.entries.removeValue(forKey: oldest.key)
                state.size -= oldest.value.size
            }
        }
    }

    func remove(_ key: String) async {
        state.withLockedValue { state in
            if let old = state.entries.removeValue(forKey: key) { state.size -= old.size }
        }
    }

    func removeAll() async {
        state.withLockedValue { $0 = State() }
    }
}
