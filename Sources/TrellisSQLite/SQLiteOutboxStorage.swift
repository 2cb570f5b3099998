#if SQLite
public import Foundation
import HTTPTypes
public import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SQLiteNIO
public import Trellis

/// An ``Trellis/Outbox``'s calls in an SQLite file (through vapor/sqlite-nio, which carries its
/// own SQLite): the embedded storage, for one process or an app.
///
/// The file is in write-ahead-log mode with `synchronous = FULL`: each stored call is in the
/// log and the log is flushed to the disk before ``Trellis/Outbox/enqueue(_:lane:)`` returns,
/// so a call survives the process killed and the machine's power cut, not only a crash of the
/// app. (`NORMAL`, SQLite's usual setting in that mode, is safe from a crash of the process but
/// may lose the last calls to a power cut.) Each operation is one statement, atomic.
///
/// A delivery writes once: the call is claimed in the process's memory, not in the file (one
/// process uses a file at a time), and its removal is written with those of the other
/// deliverers that finished meanwhile, under one flush.
///
/// ```swift
/// let storage = try await SQLiteOutboxStorage(path: directory.appending(path: "outbox.sqlite").path)
/// let outbox = Outbox(client: client, storage: storage)
/// ```
public final class SQLiteOutboxStorage: OutboxStorage {
    /// Every write goes through this connection.
    private let connection: SQLiteConnection
    /// The deliverers' reads: a connection of their own, so that a claim does not wait for the
    /// writer's flush (in WAL mode a reader sees every commit finished before it began). Buys
    /// delivery 0.47x of direct calls against 0.41x on one connection (`Benchmarks/README.md`).
    private let reader: SQLiteConnection
    /// The threads SQLite runs on, the storage's own: SwiftNIO's shared pool (two threads on
    /// two cores) also does the app's file work, and a claim queued behind a large download's
    /// writes, or a flush holding one of its threads, slowed both.
    private let threads: NIOThreadPool
    private let path: String
    /// Whether ``close()`` has not been called: sqlite-nio 1.13.2 crashes on a connection
    /// closed twice (its second close clears the hooks of a handle already freed).
    private let isOpen: NIOLockedValueBox<Bool>
    /// The calls this process is delivering (see ``claimNext(at:leaseFor:)``).
    private let claims: NIOLockedValueBox<Set<Int64>>
    /// Removals of delivered calls, written in groups.
    private let removals: StatementGroups<Int64, Void>
    /// The deliverers' claims, made in groups: one query for those looking at once, each given
    /// a different call.
    private let claimGroups: StatementGroups<Date, OutboxEntry?>

    /// Opens (or creates) the outbox in the SQLite file at `path`.
    ///
    /// - Parameter lockWait: how long a statement waits for a lock another process holds on
    ///   the file before it fails.
    /// - Throws: ``Trellis/OutboxError`` (``Trellis/OutboxError/Reason/storageFailed``) when the
    ///   file cannot be opened, is not an SQLite database or is damaged, or is a database of
    ///   something else.
    public init(path: String, lockWait: Duration = .seconds(5), logger: Logger = Logger(label: "trellis.sqlite")) async throws {
        self.path = path
        let threads = NIOThreadPool(numberOfThreads: 2)
        threads.start()
        self.threads = threads
        func open() async throws -> SQLiteConnection {
            try await SQLiteConnection.open(storage: .file(path: path), threadPool: threads, logger: logger, on: MultiThreadedEventLoopGroup.singleton.any())
        }
        let connection: SQLiteConnection
        let reader: SQLiteConnection
        do {
            connection = try await open()
            do {
                reader = try await open()
            } catch {
                try? await connection.close()
                throw error
            }
        } catch {
            try? await threads.shutdownGracefully()
            throw OutboxError(.storageFailed, "could not open the SQLite file \(path): \(error)")
        }
        self.connection = connection
        self.reader = reader
        let isOpen = NIOLockedValueBox(true)
        let claims = NIOLockedValueBox<Set<Int64>>([])
        self.isOpen = isOpen
        self.claims = claims
        removals = StatementGroups { ids in
            _ = try await Self.run("remove delivered calls from", path: path, isOpen: isOpen) {
                try await connection.query(
                    "DELETE FROM trellis_outbox WHERE id IN (\(Self.placeholders(ids.count)))",
                    ids.map { .integer(SQLiteInt64($0)) }
                )
            }
            claims.withLockedValue { $0.subtract(ids) }
            return Array(repeating: (), count: ids.count)
        }
        claimGroups = StatementGroups { moments in
            let now = moments.max() ?? Date()
            let held = claims.withLockedValue { $0 }
            let rows = try await Self.run("claim calls in", path: path, isOpen: isOpen) {
                // Only the first call of a lane can qualify, so the calls found are of
                // different lanes.
                try await reader.query(
                    """
                    SELECT * FROM trellis_outbox o
                    WHERE o.state = 'waiting' AND o.not_before <= ? \(Self.excluding(held))
                        AND NOT EXISTS (SELECT 1 FROM trellis_outbox e WHERE e.lane = o.lane AND e.id < o.id AND e.state <> 'dead')
                    ORDER BY o.id LIMIT ?
                    """,
                    [.float(now.timeIntervalSince1970)] + held.map { .integer(SQLiteInt64($0)) } + [.integer(SQLiteInt64(moments.count))]
                )
            }
            let found = try rows.map(Self.entry)
            claims.withLockedValue { $0.formUnion(found.map(\.id)) }
            return found.map { $0 } + Array(repeating: nil, count: moments.count - found.count)
        }
        do {
            try await prepare(lockWait: lockWait)
        } catch {
            // Closed here: `deinit`, which runs for an initializer that throws now, must not
            // close them again.
            isOpen.withLockedValue { $0 = false }
            try? await connection.close()
            try? await reader.close()
            try? await threads.shutdownGracefully()
            throw error
        }
    }

    /// `'TRLS'`: marks a file as a Trellis outbox, so that another program's database is not
    /// taken for one.
    private static let applicationID = 0x5452_4C53

    private func prepare(lockWait: Duration) async throws {
        let id: Int
        do {
            for connection in [connection, reader] {
                _ = try await connection.query("PRAGMA busy_timeout = \(Int(lockWait / .milliseconds(1)))")
            }
            _ = try await reader.query("PRAGMA query_only = 1")
            id = try await connection.query("PRAGMA application_id").first?.column("application_id")?.integer.map { Int($0) } ?? 0
        } catch {
            throw OutboxError(.storageFailed, "\(path) is not an SQLite database, or it is damaged: \(error)")
        }
        if id != Self.applicationID {
            let tables = try await run("read the tables of") { try await self.connection.query("SELECT count(*) AS n FROM sqlite_master") }
            guard id == 0, tables.first?.column("n")?.integer == 0 else {
                throw OutboxError(.storageFailed, "\(path) is a database of something else (application id \(id)), not a Trellis outbox")
            }
        }
        try await run("set up") {
            _ = try await self.connection.query("PRAGMA journal_mode = WAL")
            _ = try await self.connection.query("PRAGMA synchronous = FULL")
            _ = try await self.connection.query("""
                CREATE TABLE IF NOT EXISTS trellis_outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    lane TEXT NOT NULL,
                    method TEXT NOT NULL,
                    url TEXT NOT NULL,
                    fields BLOB NOT NULL,
                    body BLOB,
                    idempotency_key TEXT NOT NULL,
                    enqueued_at REAL NOT NULL,
                    state TEXT NOT NULL DEFAULT 'waiting',
                    not_before REAL NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    last_failure TEXT,
                    answer_status INTEGER,
                    answer_fields BLOB,
                    answer_body BLOB
                )
                """)
            _ = try await self.connection.query("CREATE INDEX IF NOT EXISTS trellis_outbox_lanes ON trellis_outbox (lane, id) WHERE state <> 'dead'")
            // How many calls are held, dead letters apart, kept by triggers in the statements
            // that change it: `insert` checks the limit without counting the rows each time.
            _ = try await self.connection.query("CREATE TABLE IF NOT EXISTS trellis_outbox_size (held INTEGER NOT NULL)")
            _ = try await self.connection.query(
                "INSERT INTO trellis_outbox_size SELECT count(*) FROM trellis_outbox WHERE state <> 'dead' AND NOT EXISTS (SELECT 1 FROM trellis_outbox_size)"
            )
            _ = try await self.connection.query("""
                CREATE TRIGGER IF NOT EXISTS trellis_outbox_added AFTER INSERT ON trellis_outbox WHEN new.state <> 'dead'
                BEGIN UPDATE trellis_outbox_size SET held = held + 1; END
                """)
            _ = try await self.connection.query("""
                CREATE TRIGGER IF NOT EXISTS trellis_outbox_removed AFTER DELETE ON trellis_outbox WHEN old.state <> 'dead'
                BEGIN UPDATE trellis_outbox_size SET held = held - 1; END
                """)
            _ = try await self.connection.query("""
                CREATE TRIGGER IF NOT EXISTS trellis_outbox_state AFTER UPDATE OF state ON trellis_outbox
                WHEN (old.state = 'dead') <> (new.state = 'dead')
                BEGIN UPDATE trellis_outbox_size SET held = held + (CASE WHEN new.state = 'dead' THEN -1 ELSE 1 END); END
                """)
            _ = try await self.connection.query("PRAGMA application_id = \(Self.applicationID)")
        }
    }

    /// Closes the file. A storage released without it closes its file then, on its threads,
    /// which end once it is closed.
    public func close() async throws {
        guard isOpen.withLockedValue({ open in defer { open = false }; return open }) else { return }
        defer { threads.shutdownGracefully { _ in } }
        try? await reader.close()
        try await connection.close()
    }

    deinit {
        // A connection insists on being closed before it goes, and only once; the threads stop
        // once both are (stopped first, they would drop the closes queued).
        if isOpen.withLockedValue({ $0 }) {
            let threads = threads
            reader.close().and(connection.close()).whenComplete { _ in threads.shutdownGracefully { _ in } }
        }
    }

    public func insert(_ entry: OutboxEntry, limit: Int) async throws -> OutboxEntry? {
        let rows = try await run("store a call in") {
            try await self.connection.query(
                """
                INSERT INTO trellis_outbox (lane, method, url, fields, body, idempotency_key, enqueued_at, not_before)
                SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE (SELECT held FROM trellis_outbox_size) < ?
                RETURNING *
                """,
                [
                    .text(entry.lane), .text(entry.method.rawValue), .text(entry.url), .blob(Self.encode(entry.headerFields)),
                    entry.body.map { .blob(ByteBuffer(data: $0)) } ?? .null, .text(entry.idempotencyKey),
                    .float(entry.enqueuedAt.timeIntervalSince1970), .float(entry.enqueuedAt.timeIntervalSince1970), .integer(SQLiteInt64(limit)),
                ]
            )
        }
        return try rows.first.map(Self.entry)
    }

    /// Claims the next call, in this process's memory: a claim is not written to the file (one
    /// process uses the file at a time, and the claims die with it). The claimed call stays in
    /// the table, so it still holds its lane. `lease` is not needed.
    ///
    /// A caller cancelled meanwhile gets no call: the claim is given back, since an outbox that
    /// stops, and one started after it on the same storage, would otherwise leave it claimed by
    /// nobody until the next start.
    public func claimNext(at now: Date, leaseFor lease: Duration) async throws -> OutboxEntry? {
        try Task.checkCancellation()
        let entry = try await claimGroups.submit(now)
        if Task.isCancelled {
            if let entry { unclaim([entry.id]) }
            throw CancellationError()
        }
        return entry
    }

    /// `AND o.id NOT IN (…)` for the calls claimed, with a placeholder each.
    private static func excluding(_ claimed: Set<Int64>) -> String {
        claimed.isEmpty ? "" : "AND o.id NOT IN (\(placeholders(claimed.count)))"
    }

    /// `?, ?, …`, `count` times.
    private static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    /// Does nothing: the claims are this process's until it dies.
    public func renewClaims(_ ids: [Int64], leaseFor lease: Duration) async throws {}

    /// Forgets the claims: the deliverers of an outbox that ran before on this storage are
    /// gone. (A file an earlier Trellis wrote may mark calls as being delivered; those are
    /// made due again.)
    public func releaseClaims() async throws {
        claims.withLockedValue { $0 = [] }
        _ = try await run("release the claims of") {
            try await self.connection.query("UPDATE trellis_outbox SET state = 'waiting' WHERE state = 'delivering'")
        }
    }

    /// Removes a delivered call, in one statement with those other deliverers finished while
    /// the last removal was being flushed.
    public func delivered(_ id: Int64) async throws {
        try await removals.submit(id)
    }

    public func reschedule(_ id: Int64, notBefore: Date, failure: String) async throws {
        _ = try await run("reschedule a call in") {
            try await self.connection.query(
                "UPDATE trellis_outbox SET state = 'waiting', attempts = attempts + 1, not_before = ?, last_failure = ? WHERE id = ?",
                [.float(notBefore.timeIntervalSince1970), .text(failure), .integer(SQLiteInt64(id))]
            )
        }
        unclaim([id])
    }

    public func deadLetter(_ id: Int64, reason: String, answer: Response<Data>?) async throws {
        _ = try await run("keep a dead letter in") {
            try await self.connection.query(
                """
                UPDATE trellis_outbox SET state = 'dead', last_failure = ?, answer_status = ?, answer_fields = ?, answer_body = ?
                WHERE id = ?
                """,
                [
                    .text(reason), answer.map { .integer(SQLiteInt64($0.status.code)) } ?? .null,
                    answer.map { .blob(Self.encode($0.headerFields)) } ?? .null, answer.map { .blob(ByteBuffer(data: $0.body)) } ?? .null,
                    .integer(SQLiteInt64(id)),
                ]
            )
        }
        unclaim([id])
    }

    public func entries(deadLetters: Bool) async throws -> [OutboxEntry] {
        let rows = try await run("read the calls of") {
            try await self.reader.query("SELECT * FROM trellis_outbox WHERE state \(deadLetters ? "=" : "<>") 'dead' ORDER BY id")
        }
        return try rows.map(Self.entry)
    }

    public func remove(_ id: Int64) async throws {
        _ = try await run("remove a call from") {
            try await self.connection.query("DELETE FROM trellis_outbox WHERE id = ?", [.integer(SQLiteInt64(id))])
        }
        unclaim([id])
    }

    /// Drops the claims on calls whose end is written: only then may another deliverer see
    /// them (a call rescheduled, read before its new time was written, would be sent at once).
    private func unclaim(_ ids: [Int64]) {
        claims.withLockedValue { $0.subtract(ids) }
    }

    public func revive(_ id: Int64) async throws {
        _ = try await run("revive a dead letter in") {
            try await self.connection.query(
                """
                UPDATE trellis_outbox SET state = 'waiting', attempts = 0, not_before = 0,
                    answer_status = NULL, answer_fields = NULL, answer_body = NULL
                WHERE id = ? AND state = 'dead'
                """,
                [.integer(SQLiteInt64(id))]
            )
        }
    }

    public func nextDue(at now: Date) async throws -> Date? {
        let held = claims.withLockedValue { $0 }
        let rows = try await run("read the next call of") {
            try await self.reader.query(
                """
                SELECT min(o.not_before) AS due FROM trellis_outbox o
                WHERE o.state = 'waiting' \(Self.excluding(held))
                    AND NOT EXISTS (SELECT 1 FROM trellis_outbox e WHERE e.lane = o.lane AND e.id < o.id AND e.state <> 'dead')
                """,
                held.map { .integer(SQLiteInt64($0)) }
            )
        }
        return rows.first?.column("due")?.double.map(Date.init(timeIntervalSince1970:))
    }

    /// `operation`, whose SQLite error becomes an ``Trellis/OutboxError`` naming the file and
    /// what was being done (a full disk is SQLite's `SQLITE_FULL`, "database or disk is full").
    private func run<Value>(_ what: String, _ operation: () async throws -> Value) async throws -> Value {
        try await Self.run(what, path: path, isOpen: isOpen, operation)
    }

    private static func run<Value>(
        _ what: String, path: String, isOpen: NIOLockedValueBox<Bool>, _ operation: () async throws -> Value
    ) async throws -> Value {
        guard isOpen.withLockedValue({ $0 }) else {
            throw OutboxError(.storageFailed, "could not \(what) the outbox in \(path): the storage was closed")
        }
        do {
            return try await operation()
        } catch let error as OutboxError {
            throw error
        } catch {
            throw OutboxError(.storageFailed, "could not \(what) the outbox in \(path): \(error)")
        }
    }

    private static func encode(_ fields: HTTPFields) -> ByteBuffer {
        ByteBuffer(data: OutboxFieldsCoding.encode(fields))
    }

    private static func decode(_ data: SQLiteData?) throws -> HTTPFields {
        guard case .blob(let buffer) = data else { return [:] }
        return try OutboxFieldsCoding.decode(Data(buffer: buffer))
    }

    private static func entry(_ row: SQLiteRow) throws -> OutboxEntry {
        guard let id = row.column("id")?.integer, let lane = row.column("lane")?.string,
            let methodText = row.column("method")?.string, let method = HTTPRequest.Method(methodText),
            let url = row.column("url")?.string, let key = row.column("idempotency_key")?.string,
            let enqueued = row.column("enqueued_at")?.double
        else { throw OutboxError(.storageFailed, "a row of the outbox is not one Trellis wrote") }
        var body: Data?
        if case .blob(let buffer) = row.column("body") { body = Data(buffer: buffer) }
        var answer: Response<Data>?
        if let status = row.column("answer_status")?.integer {
            var answerBody = Data()
            if case .blob(let buffer) = row.column("answer_body") { answerBody = Data(buffer: buffer) }
            answer = Response(head: HTTPResponse(status: .init(code: Int(status)), headerFields: try decode(row.column("answer_fields"))), body: answerBody)
        }
        return OutboxEntry(
            id: Int64(id), lane: lane, method: method, url: url, headerFields: try decode(row.column("fields")), body: body,
            idempotencyKey: key, enqueuedAt: Date(timeIntervalSince1970: enqueued), attempts: row.column("attempts")?.integer.map { Int($0) } ?? 0,
            lastFailure: row.column("last_failure")?.string, finalAnswer: answer
        )
    }
}
#endif
