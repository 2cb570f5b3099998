#if Postgres
import Logging
import PostgresNIO
#endif

/// The check on the table names the stores are given, which go into their statements as they
/// are (a name cannot be a bound parameter).
enum PostgresTableName {
    /// Whether `name` is letters, digits and underscores, not starting with a digit.
    static func isPlainIdentifier(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
    }

    #if Postgres
    /// Runs `migration`, which creates `table` if it is missing, under the advisory lock every
    /// Trellis store takes to create its table.
    ///
    /// `CREATE TABLE IF NOT EXISTS` is not safe from two sessions at once: both find the table
    /// missing, and the second fails on the unique index of the table's row type
    /// (`23505`, `pg_type_typname_nsp_index`). Processes of a fleet that start together and each
    /// create the tables would fail so; under the lock, they create them one after another, and
    /// the later ones find them there.
    static func create(_ table: String, with migration: String, on client: PostgresClient, logger: Logger) async throws {
        do {
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended('trellis: creating tables', 0))", logger: logger)
                try await connection.query(PostgresQuery(unsafeSQL: migration), logger: logger)
            }
        } catch {
            throw PostgresTableCreationError(table: table, reason: String(reflecting: AdvisoryLock.firstFailure(of: error)))
        }
    }
    #endif
}

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
