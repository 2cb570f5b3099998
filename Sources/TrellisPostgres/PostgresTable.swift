#if Postgres
import Logging
import PostgresNIO

/// The table a store keeps in PostgreSQL, and what every store does with it the same way: the
/// check on its name, its creation under the fleet's lock, its statements, and the database's
/// clock those statements measure time on.
struct PostgresTable: Sendable {
    /// The client of the database every process shares; the store's user runs it.
    let client: PostgresClient
    /// The table's name, a plain SQL identifier (checked when the store is made).
    let name: String
    let logger: Logger

    /// The database's clock in seconds since 1970, as the stores' statements read it: every
    /// process of a fleet measures on that one clock, whatever its own says.
    static let now = "extract(epoch FROM clock_timestamp())::double precision"

    /// The table `name` of the database `client` reaches, for the store `store` names.
    ///
    /// - Precondition: `name` is a plain SQL identifier (``isPlainIdentifier(_:)``): it goes
    ///   into the statements as it is, since a name cannot be a bound parameter.
    init(client: PostgresClient, name: String, store: String, logger: Logger) {
        precondition(Self.isPlainIdentifier(name), "\(store): \(name) is not a plain SQL identifier")
        self.client = client
        self.name = name
        self.logger = logger
    }

    /// Whether `name` is letters, digits and underscores, not starting with a digit.
    static func isPlainIdentifier(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
    }

    /// Runs `statements` (the table's `CREATE TABLE IF NOT EXISTS`, and its indexes), in one
    /// transaction under the advisory lock every Trellis store takes to create its table.
    ///
    /// `CREATE TABLE IF NOT EXISTS` is not safe from two sessions at once: both find the table
    /// missing, and the second fails on the unique index of the table's row type
    /// (`23505`, `pg_type_typname_nsp_index`). Processes of a fleet that start together and each
    /// create the tables would fail so; under the lock, they create them one after another, and
    /// the later ones find them there.
    ///
    /// - Throws: ``PostgresTableCreationError`` naming the table and the database's error.
    func create(_ statements: [String]) async throws {
        do {
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended('trellis: creating tables', 0))", logger: logger)
                for statement in statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
            }
        } catch {
            throw PostgresTableCreationError(table: name, reason: String(reflecting: AdvisoryLock.firstFailure(of: error)))
        }
    }

    /// Runs `sql`, whose `$n` take `bindings`, on a connection of the client's.
    @discardableResult
    func query(_ sql: String, _ bindings: PostgresBindings = PostgresBindings()) async throws -> PostgresRowSequence {
        try await client.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
    }
}
#endif

/// A store's table could not be created (`createTable()`): the table, and what PostgreSQL or
/// the connection said.
public struct PostgresTableCreationError: Error, Sendable, CustomStringConvertible {
    /// The table's name.
    public let table: String
    /// What failed.
    public let reason: String

    /// The table and the reason, in words.
    public var description: String { "the PostgreSQL table \(table) could not be created: \(reason)" }
}
