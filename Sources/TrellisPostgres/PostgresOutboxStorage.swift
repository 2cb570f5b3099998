#if Postgres
public import Foundation
import HTTPTypes
public import Logging
public import PostgresNIO
public import Trellis

/// An ``Trellis/Outbox``'s calls in a PostgreSQL table that a fleet of processes drains
/// together: each process runs an outbox on the same table, and every call is delivered by one
/// of them, in its lane's order.
///
/// A process claims a call with `FOR UPDATE SKIP LOCKED` (so that processes claiming at once
/// pass over each other's rows rather than wait for them) and holds the claim for
/// ``Trellis/OutboxSettings/claimLease``, renewed while its delivery lasts. A process that dies
/// stops renewing: once its lease has run out, on the database's clock, another process claims
/// the call and delivers it again, with the same idempotency key. Each operation is one
/// statement, committed before it returns, so `enqueue` returns only once the call is in the
/// database.
///
/// ```swift
/// let postgres = PostgresClient(configuration: configuration)   // run it beside your service
/// let storage = PostgresOutboxStorage(client: postgres)
/// try await storage.createTable()
/// let outbox = Outbox(client: client, storage: storage)
/// ```
///
/// Processes learn of the calls others enqueue by looking every ``pollInterval``. A process
/// that stalls past its lease (a pause longer than it, not a slow server: the lease is renewed
/// while the delivery waits) may see its call delivered by another as well; the key makes
/// that one effect on a server that honours it.
public struct PostgresOutboxStorage: OutboxStorage {
    /// The client of the database every process shares; the caller runs it.
    public var client: PostgresClient { postgresTable.client }
    /// The table's name, a plain SQL identifier.
    public var table: String { postgresTable.name }
    /// The longest each statement may take before the storage counts as failed.
    public let timeLimit: Duration
    /// How often an outbox on this storage looks for calls that other processes enqueued, and
    /// for claims of processes that died.
    public let pollInterval: Duration?
    private let postgresTable: PostgresTable

    /// A storage in `table` of the database `client` reaches.
    ///
    /// - Precondition: `table` is a plain SQL identifier: letters, digits and underscores, not
    ///   starting with a digit.
    public init(
        client: PostgresClient,
        table: String = "trellis_outbox",
        timeLimit: Duration = .seconds(5),
        pollInterval: Duration = .seconds(1),
        logger: Logger = Logger(label: "trellis.postgres")
    ) {
        postgresTable = PostgresTable(client: client, name: table, store: "PostgresOutboxStorage", logger: logger)
        self.timeLimit = timeLimit
        self.pollInterval = max(.milliseconds(1), pollInterval)
    }

    /// The statements that create the storage's table and its index, for a migration of your own.
    public var migration: String { migrationStatements.joined(separator: ";\n") + ";" }

    private var migrationStatements: [String] {
        [
            """
            CREATE TABLE IF NOT EXISTS \(table) (
                id bigserial PRIMARY KEY,
                lane text NOT NULL,
                method text NOT NULL,
                url text NOT NULL,
                fields bytea NOT NULL,
                body bytea,
                idempotency_key text NOT NULL,
                enqueued_at double precision NOT NULL,
                state text NOT NULL DEFAULT 'waiting',
                not_before double precision NOT NULL,
                lease_until double precision,
                attempts integer NOT NULL DEFAULT 0,
                last_failure text,
                answer_status integer,
                answer_fields bytea,
                answer_body bytea
            )
            """,
            "CREATE INDEX IF NOT EXISTS \(table)_lanes ON \(table) (lane, id) WHERE state <> 'dead'",
        ]
    }

    /// Creates the storage's table if it is not there. Any number of processes may call it at
    /// once: they take one advisory lock to create their tables.
    ///
    /// - Throws: ``PostgresTableCreationError`` naming the table and the database's error.
    public func createTable() async throws {
        try await postgresTable.create(migrationStatements)
    }

    private static let columns = "id, lane, method, url, fields, body, idempotency_key, enqueued_at, attempts, last_failure, answer_status, answer_fields, answer_body"

    public func insert(_ entry: OutboxEntry, limit: Int) async throws -> OutboxEntry? {
        var bindings = PostgresBindings()
        bindings.append(entry.lane)
        bindings.append(entry.method.rawValue)
        bindings.append(entry.url)
        try bindings.append(OutboxFieldsCoding.encode(entry.headerFields))
        if let body = entry.body { try bindings.append(body) } else { bindings.appendNull() }
        bindings.append(entry.idempotencyKey)
        bindings.append(entry.enqueuedAt.timeIntervalSince1970)
        bindings.append(Int64(limit))
        let sql = """
            INSERT INTO \(table) (lane, method, url, fields, body, idempotency_key, enqueued_at, not_before)
            SELECT $1, $2, $3, $4, $5, $6, $7, $7 WHERE (SELECT count(*) FROM \(table) WHERE state <> 'dead') < $8
            RETURNING \(Self.columns)
            """
        return try await entries("store a call in", sql, bindings).first
    }

    public func claimNext(at now: Date, leaseFor lease: Duration) async throws -> OutboxEntry? {
        var bindings = PostgresBindings()
        bindings.append(now.timeIntervalSince1970)
        bindings.append(lease.inSeconds)
        // The lane's order holds across processes: a call is claimed only when no earlier call
        // of its lane is left (waiting, claimed, or locked by a claim under way elsewhere).
        let sql = """
            UPDATE \(table) SET state = 'delivering', lease_until = \(PostgresTable.now) + $2
            WHERE id = (
                SELECT o.id FROM \(table) o
                WHERE ((o.state = 'waiting' AND o.not_before <= $1) OR (o.state = 'delivering' AND o.lease_until < \(PostgresTable.now)))
                    AND NOT EXISTS (SELECT 1 FROM \(table) e WHERE e.lane = o.lane AND e.id < o.id AND e.state <> 'dead')
                ORDER BY o.id LIMIT 1
                FOR UPDATE SKIP LOCKED
            )
            RETURNING \(Self.columns)
            """
        return try await entries("claim a call in", sql, bindings).first
    }

    public func renewClaims(_ ids: [Int64], leaseFor lease: Duration) async throws {
        var bindings = PostgresBindings()
        bindings.append(ids)
        bindings.append(lease.inSeconds)
        try await run("renew the claims in", "UPDATE \(table) SET lease_until = \(PostgresTable.now) + $2 WHERE id = ANY($1) AND state = 'delivering'", bindings)
    }

    /// Does nothing: the claims of a process that died run out with their leases, and those of
    /// the processes still running are theirs.
    public func releaseClaims() async throws {}

    public func delivered(_ id: Int64) async throws {
        try await remove(id)
    }

    public func reschedule(_ id: Int64, notBefore: Date, failure: String) async throws {
        var bindings = PostgresBindings()
        bindings.append(id)
        bindings.append(notBefore.timeIntervalSince1970)
        bindings.append(failure)
        try await run(
            "reschedule a call in",
            "UPDATE \(table) SET state = 'waiting', attempts = attempts + 1, not_before = $2, last_failure = $3, lease_until = NULL WHERE id = $1",
            bindings
        )
    }

    public func deadLetter(_ id: Int64, reason: String, answer: Response<Data>?) async throws {
        var bindings = PostgresBindings()
        bindings.append(id)
        bindings.append(reason)
        if let answer {
            bindings.append(answer.status.code)
            try bindings.append(OutboxFieldsCoding.encode(answer.headerFields))
            try bindings.append(answer.body)
        } else {
            bindings.appendNull()
            bindings.appendNull()
            bindings.appendNull()
        }
        try await run(
            "keep a dead letter in",
            "UPDATE \(table) SET state = 'dead', lease_until = NULL, last_failure = $2, answer_status = $3, answer_fields = $4, answer_body = $5 WHERE id = $1",
            bindings
        )
    }

    public func entries(deadLetters: Bool) async throws -> [OutboxEntry] {
        try await entries("read the calls of", "SELECT \(Self.columns) FROM \(table) WHERE state \(deadLetters ? "=" : "<>") 'dead' ORDER BY id", PostgresBindings())
    }

    public func remove(_ id: Int64) async throws {
        var bindings = PostgresBindings()
        bindings.append(id)
        try await run("remove a call from", "DELETE FROM \(table) WHERE id = $1", bindings)
    }

    public func revive(_ id: Int64) async throws {
        var bindings = PostgresBindings()
        bindings.append(id)
        let sql = """
            UPDATE \(table) SET state = 'waiting', attempts = 0, not_before = 0, answer_status = NULL, answer_fields = NULL, answer_body = NULL
            WHERE id = $1 AND state = 'dead'
            """
        try await run("revive a dead letter in", sql, bindings)
    }

    public func nextDue(at now: Date) async throws -> Date? {
        var bindings = PostgresBindings()
        bindings.append(now.timeIntervalSince1970)
        // A claim's lease is on the database's clock: it runs out `lease_until - now` from now
        // on this process's.
        let sql = """
            SELECT least(
                (SELECT min(o.not_before) FROM \(table) o WHERE o.state = 'waiting'
                    AND NOT EXISTS (SELECT 1 FROM \(table) e WHERE e.lane = o.lane AND e.id < o.id AND e.state <> 'dead')),
                (SELECT $1 + min(lease_until) - \(PostgresTable.now) FROM \(table) WHERE state = 'delivering')
            )
            """
        let rows = try await run("read the next call of", sql, bindings)
        return rows.first.flatMap { $0 }.map(Date.init(timeIntervalSince1970:))
    }

    /// `sql`'s rows as entries.
    private func entries(_ what: String, _ sql: String, _ bindings: PostgresBindings) async throws -> [OutboxEntry] {
        try await limited(what) {
            var entries: [OutboxEntry] = []
            for try await row in try await postgresTable.query(sql, bindings) {
                entries.append(try Self.entry(row.makeRandomAccess()))
            }
            return entries
        }
    }

    /// Runs `sql`, and returns the first column of its rows, a number or nothing.
    @discardableResult
    private func run(_ what: String, _ sql: String, _ bindings: PostgresBindings) async throws -> [Double?] {
        try await limited(what) {
            var values: [Double?] = []
            for try await value in try await postgresTable.query(sql, bindings).decode(Double?.self) { values.append(value) }
            return values
        }
    }

    /// `operation` within ``timeLimit``; its failure becomes an ``Trellis/OutboxError`` naming
    /// the table and what was being done. The rows are read inside it: postgres-nio hands a
    /// statement's failure over only as they are read.
    private func limited<Value: Sendable>(_ what: String, _ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        do {
            return try await withTimeLimit(timeLimit, on: SharedStateClock.current, operation)
        } catch let error as OutboxError {
            throw error
        } catch {
            throw OutboxError(.storageFailed, "could not \(what) the outbox in the PostgreSQL table \(table): \(String(reflecting: error))")
        }
    }

    private static func entry(_ row: PostgresRandomAccessRow) throws -> OutboxEntry {
        do {
            guard let method = HTTPRequest.Method(try row["method"].decode(String.self)) else {
                throw OutboxError(.storageFailed, "a stored call's method is not one HTTP allows")
            }
            var answer: Response<Data>?
            if let status = try row["answer_status"].decode(Int?.self) {
                let fields = try OutboxFieldsCoding.decode(try row["answer_fields"].decode(Data?.self) ?? Data("[]".utf8))
                answer = Response(head: HTTPResponse(status: .init(code: status), headerFields: fields), body: try row["answer_body"].decode(Data?.self) ?? Data())
            }
            return OutboxEntry(
                id: try row["id"].decode(Int64.self),
                lane: try row["lane"].decode(String.self),
                method: method,
                url: try row["url"].decode(String.self),
                headerFields: try OutboxFieldsCoding.decode(try row["fields"].decode(Data.self)),
                body: try row["body"].decode(Data?.self),
                idempotencyKey: try row["idempotency_key"].decode(String.self),
                enqueuedAt: Date(timeIntervalSince1970: try row["enqueued_at"].decode(Double.self)),
                attempts: try row["attempts"].decode(Int.self),
                lastFailure: try row["last_failure"].decode(String?.self),
                finalAnswer: answer
            )
        } catch let error as OutboxError {
            throw error
        } catch {
            throw OutboxError(.storageFailed, "a row of the outbox is not one Trellis wrote: \(String(reflecting: error))")
        }
    }
}
#endif
