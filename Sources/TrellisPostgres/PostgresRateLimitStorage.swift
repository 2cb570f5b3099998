#if Postgres
public import Logging
public import PostgresNIO
public import Trellis

/// A ``Trellis/RateLimitStorage`` in a PostgreSQL table: one row per key, holding when its next
/// turn is due on the database's clock, so that every process that reaches the database shares
/// one quota.
///
/// Each batch is one statement: an upsert that moves the key's next turn on by the batch, under
/// the row's lock, and returns the batch's first turn and the database's time. Turns are given
/// as waits from that time, so the processes' own clocks need not agree.
///
/// ```swift
/// let postgres = PostgresClient(configuration: configuration)   // run it beside your service
/// let store = PostgresRateLimitStorage(client: postgres)
/// try await store.createTable()
/// let client = Client(baseURL: url) {
///     $0.resilience.rateLimit = RateLimit(requests: 100, per: .seconds(1), sharing: RateLimitSharing(storage: store))
/// }
/// ```
public struct PostgresRateLimitStorage: RateLimitStorage {
    /// The client of the database every process shares; the caller runs it.
    public var client: PostgresClient { postgresTable.client }
    /// The table's name, a plain SQL identifier.
    public var table: String { postgresTable.name }
    private let postgresTable: PostgresTable

    /// A store in `table` of the database `client` reaches.
    ///
    /// - Precondition: `table` is a plain SQL identifier: letters, digits and underscores, not
    ///   starting with a digit.
    public init(client: PostgresClient, table: String = "trellis_rate_limit_turns", logger: Logger = Logger(label: "trellis.postgres")) {
        postgresTable = PostgresTable(client: client, name: table, store: "PostgresRateLimitStorage", logger: logger)
    }

    /// The statement that creates the store's table, for a migration of your own.
    public var migration: String {
        """
        CREATE TABLE IF NOT EXISTS \(table) (
            key text PRIMARY KEY,
            next_turn double precision NOT NULL
        )
        """
    }

    /// Creates the store's table if it is not there. Any number of processes may call it at
    /// once: they take one advisory lock to create their tables.
    ///
    /// - Throws: ``PostgresTableCreationError`` naming the table and the database's error.
    public func createTable() async throws {
        try await postgresTable.create([migration])
    }

    public func takeTurns(_ count: Int, of key: String, under limit: RateLimit) async throws -> [Duration] {
        let interval = (limit.period / limit.requests).inSeconds
        let span = interval * Double(count)
        let tolerance = interval * Double(limit.burst - 1)
        var bindings = PostgresBindings()
        bindings.append(key)
        bindings.append(span)
        let sql = """
            WITH clock AS (SELECT \(PostgresTable.now) AS now)
            INSERT INTO \(table) AS turns (key, next_turn) SELECT $1, clock.now + $2 FROM clock
            ON CONFLICT (key) DO UPDATE SET next_turn = greatest(turns.next_turn, (SELECT now FROM clock)) + $2
            RETURNING turns.next_turn - $2, (SELECT now FROM clock)
            """
        let rows = try await postgresTable.query(sql, bindings)
        for try await (first, now) in rows.decode((Double, Double).self) {
            return (0..<count).map { index in
                .seconds(max(0, first + interval * Double(index) - tolerance - now))
            }
        }
        return []
    }

    public func hold(_ key: String, for duration: Duration, under limit: RateLimit) async throws {
        let interval = (limit.period / limit.requests).inSeconds
        let until = duration.inSeconds + interval * Double(limit.burst - 1)
        var bindings = PostgresBindings()
        bindings.append(key)
        bindings.append(until)
        let sql = """
            WITH clock AS (SELECT \(PostgresTable.now) AS now)
            INSERT INTO \(table) AS turns (key, next_turn) SELECT $1, clock.now + $2 FROM clock
            ON CONFLICT (key) DO UPDATE SET next_turn = greatest(turns.next_turn, (SELECT now FROM clock) + $2)
            """
        try await postgresTable.query(sql, bindings)
    }
}
#endif
