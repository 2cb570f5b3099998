#if Postgres
import Foundation
public import Logging
public import PostgresNIO
public import Trellis

/// An ``Trellis/HTTPCacheStorage`` in a PostgreSQL table that a fleet of processes shares: a
/// response one process fetched is served to the others, and processes that miss the same URL
/// at once fetch it once.
///
/// One row per entry, with its size and when it was last used. A read is one statement that
/// returns the entry and marks it used; a write stores the entry, then evicts the least
/// recently used entries past ``capacity``. A miss takes a transaction-scoped advisory lock on
/// the URL for the time of its fetch, so the processes that miss it meanwhile wait (up to
/// ``lockWait``) and then read what it stored; without a connection in ``timeLimit`` (the
/// database is down), or without the lock in ``lockWait`` and ``timeLimit`` beside it, a process
/// fetches alone.
///
/// ```swift
/// let postgres = PostgresClient(configuration: configuration)   // run it beside your service
/// let responses = PostgresHTTPCacheStorage(client: postgres, capacity: 256 << 20)
/// try await responses.createTable()
/// let client = Client(baseURL: url) { $0.cache = HTTPCache(storage: responses) }
/// ```
public final class PostgresHTTPCacheStorage: HTTPCacheStorage {
    /// The client of the database every process shares; the caller runs it.
    public var client: PostgresClient { postgresTable.client }
    /// The table's name, a plain SQL identifier.
    public var table: String { postgresTable.name }
    /// The most bytes the table holds, heads and bodies together; past it, the least recently
    /// used entries go.
    public let capacity: Int
    /// How long a miss waits for a connection, and beyond ``lockWait`` for the lock, before
    /// it fetches without the fleet's lock.
    public let timeLimit: Duration
    /// How long a miss waits for another process's fetch of the same URL.
    public let lockWait: Duration
    private let postgresTable: PostgresTable

    /// A storage in `table` of the database `client` reaches, of at most `capacity` bytes.
    ///
    /// - Precondition: `table` is a plain SQL identifier: letters, digits and underscores, not
    ///   starting with a digit.
    public init(
        client: PostgresClient,
        table: String = "trellis_http_cache",
        capacity: Int = 256 << 20,
        timeLimit: Duration = .seconds(1),
        lockWait: Duration = .seconds(30),
        logger: Logger = Logger(label: "trellis.postgres")
    ) {
        postgresTable = PostgresTable(client: client, name: table, store: "PostgresHTTPCacheStorage", logger: logger)
        self.capacity = max(0, capacity)
        self.timeLimit = timeLimit
        self.lockWait = lockWait
    }

    /// The statement that creates the storage's table, for a migration of your own.
    public var migration: String {
        """
        CREATE TABLE IF NOT EXISTS \(table) (
            key text PRIMARY KEY,
            head bytea NOT NULL,
            body bytea NOT NULL,
            size bigint NOT NULL,
            last_used double precision NOT NULL
        )
        """
    }

    /// Creates the storage's table if it is not there. Any number of processes may call it at
    /// once: they take one advisory lock to create their tables.
    ///
    /// - Throws: ``PostgresTableCreationError`` naming the table and the database's error.
    public func createTable() async throws {
        try await postgresTable.create([migration])
    }

    public func entry(for key: String) async throws -> HTTPCacheEntry? {
        var bindings = PostgresBindings()
        bindings.append(key)
        let sql = """
            UPDATE \(table) SET last_used = \(PostgresTable.now)
            WHERE key = $1 RETURNING head, body
            """
        let rows = try await postgresTable.query(sql, bindings)
        for try await (head, body) in rows.decode((Data, Data).self) {
            return HTTPCacheEntry(head: head, body: body)
        }
        return nil
    }

    public func store(_ entry: HTTPCacheEntry, for key: String) async throws {
        guard entry.size + key.utf8.count <= capacity else { return }
        var bindings = PostgresBindings()
        bindings.append(key)
        try bindings.append(entry.head)
        try bindings.append(entry.body)
        bindings.append(Int64(entry.size + key.utf8.count))
        let sql = """
            INSERT INTO \(table) (key, head, body, size, last_used)
            VALUES ($1, $2, $3, $4, \(PostgresTable.now))
            ON CONFLICT (key) DO UPDATE SET head = excluded.head, body = excluded.body, size = excluded.size, last_used = excluded.last_used
            """
        try await postgresTable.query(sql, bindings)
        // The entries past the capacity, counted from the most recently used.
        var limit = PostgresBindings()
        limit.append(Int64(capacity))
        let evict = """
            DELETE FROM \(table) WHERE key IN (
                SELECT key FROM (SELECT key, sum(size) OVER (ORDER BY last_used DESC, key) AS kept FROM \(table)) AS ranked
                WHERE kept > $1
            )
            """
        try await postgresTable.query(evict, limit)
    }

    public func removeEntry(for key: String) async throws {
        var bindings = PostgresBindings()
        bindings.append(key)
        try await postgresTable.query("DELETE FROM \(table) WHERE key = $1", bindings)
    }

    public func removeAll() async throws {
        try await postgresTable.query("DELETE FROM \(table)")
    }

    public func fetchingOnce<Result: Sendable>(_ key: String, _ fetch: () async throws -> Result) async throws -> Result {
        // The lock is held by a transaction in a task of its own, from when it is taken until
        // this caller's fetch is done; the fetch runs in the caller's task.
        let lease: LockLease?
        do {
            lease = try await LockLease.take(
                "\(table):\(key)", naming: key, on: client, connectingWithin: timeLimit, waitingAtMost: lockWait,
                setting: "lockWait: \(lockWait)", clock: SharedStateClock.current, logger: postgresTable.logger
            )
        } catch {
            postgresTable.logger.warning("[Trellis] the fleet's lock on fetching \(key) could not be taken (\(error)); this process fetches it alone")
            lease = nil
        }
        defer { lease?.release() }
        return try await fetch()
    }

}
#endif
