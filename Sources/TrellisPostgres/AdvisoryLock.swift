#if Postgres
import Logging
import PostgresNIO

/// The transaction-scoped advisory lock the storages take on a key (a token's label, a cache
/// entry's URL), in one place: how it is asked for, how long the server waits for it, and
/// what a wait that runs out is called.
///
/// PostgreSQL releases the lock when the holder's transaction ends, and so when its session
/// does: a process that dies while it holds the lock frees it for the next in line.
enum AdvisoryLock {
    /// The wait for the lock ran out at the server (`lock_timeout`, SQLSTATE `55P03`): another
    /// session held it the whole time.
    struct WaitRanOut: Error, CustomStringConvertible {
        let key: String
        let wait: Duration
        /// The setting that bounds the wait, as the user names it.
        let setting: String
        var description: String { "the wait for the fleet's lock on \(key) ran out after \(wait) (\(setting))" }
    }

    /// Takes the lock on `key` in `connection`'s transaction, waiting at most `wait` (the
    /// server's `lock_timeout`; `nil`: as long as the holder holds it).
    ///
    /// The statement's rows are read to their end: postgres-nio hands over a statement's
    /// failure (a lock timeout) only as its rows are read, and a failure left unread aborts the
    /// transaction, so that the next statement fails instead with `25P02` and names nothing.
    static func take(
        _ key: String,
        on connection: PostgresConnection,
        waitingAtMost wait: Duration?,
        setting: String,
        logger: Logger
    ) async throws {
        var bindings = PostgresBindings()
        bindings.append(wait.map { "\(max(1, Int64(($0.inSeconds * 1000).rounded())))ms" } ?? "0")
        bindings.append(key)
        let query = PostgresQuery(
            unsafeSQL: "SELECT set_config('lock_timeout', $1, true), pg_advisory_xact_lock(hashtextextended($2, 0))", binds: bindings
        )
        do {
            let rows = try await connection.query(query, logger: logger)
            for try await _ in rows {}
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55P03" {
            throw WaitRanOut(key: key, wait: wait ?? .zero, setting: setting)
        }
    }

    /// The first failure of a transaction: the one its closure threw, rather than the
    /// wrapper postgres-nio puts around it (or the `25P02` of a statement after it).
    static func firstFailure(of error: any Error) -> any Error {
        guard let transaction = error as? PostgresTransactionError else { return error }
        return transaction.beginError ?? transaction.closureError ?? transaction.commitError ?? error
    }
}
#endif
