#if Postgres
public import Logging
public import PostgresNIO
public import Trellis

/// A ``Trellis/SharedPauseStorage`` in a PostgreSQL table: one row per origin, holding when its
/// pause ends on the database's clock, so that a `Retry-After` one process is told pauses every
/// process that reaches the database.
///
/// Telling of a pause is one upsert that keeps the later end; reading the pauses in force is
/// one query, which a process makes at most once per ``Trellis/PauseSharing/readEvery``.
///
/// ```swift
/// let postgres = PostgresClient(configuration: configuration)   // run it beside your service
/// let pauses = PostgresPauseStorage(client: postgres)
/// try await pauses.createTable()
/// let client = Client(baseURL: url) {
///     $0.resilience.sharedBackoff = SharedBackoff(sharing: PauseSharing(storage: pauses))
/// }
/// ```
public struct PostgresPauseStorage: SharedPauseStorage {
    /// The client of the database every process shares; the caller runs it.
    public var client: PostgresClient { postgresTable.client }
    /// The table's name, a plain SQL identifier.
    public var table: String { postgresTable.name }
    private let postgresTable: PostgresTable

    /// A store in `table` of the database `client` reaches.
    ///
    /// - Precondition: `table` is a plain SQL identifier: letters, digits and underscores, not
    ///   starting with a digit.
    public init(client: PostgresClient, table: String = "trellis_pauses", logger: Logger = Logger(label: "trellis.postgres")) {
        postgresTable = PostgresTable(client: client, name: table, store: "PostgresPauseStorage", logger: logger)
    }

    /// The statement that creates the store's table, for a migration of your own.
    public var migration: String {
        """
        CREATE TABLE IF NOT EXISTS \(table) (
            origin text PRIMARY KEY,
            pause_ends double precision NOT NULL
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

    public func pause(_ origin: String, for duration: Duration) async throws {
        var bindings = PostgresBindings()
        bindings.append(origin)
        bindings.append(duration.inSeconds)
        let sql = """
            INSERT INTO \(table) AS pauses (origin, pause_ends)
            VALUES ($1, \(PostgresTable.now) + $2)
            ON CONFLICT (origin) DO UPDATE SET pause_ends = greatest(pauses.pause_ends, excluded.pause_ends)
            """
        try await postgresTable.query(sql, bindings)
    }

    public func pauses() async throws -> [String: Duration] {
        let sql = """
            WITH clock AS (SELECT \(PostgresTable.now) AS now)
            SELECT origin, pause_ends - clock.now FROM \(table), clock WHERE pause_ends > clock.now
            """
        let rows = try await postgresTable.query(sql)
        var pauses: [String: Duration] = [:]
        for try await (origin, remaining) in rows.decode((String, Double).self) {
            pauses[origin] = .milliseconds(Int64(remaining * 1000))
        }
        return pauses
    }
}
#endif
