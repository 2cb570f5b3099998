#if Postgres
import Foundation
public import Logging
import NIOConcurrencyHelpers
public import PostgresNIO
public import Trellis

/// Access tokens kept in a PostgreSQL table that a fleet of processes shares, refreshed by one
/// process at a time: a ``Trellis/SharedAccessTokenStorage``.
///
/// A refresh takes a transaction-scoped advisory lock on the label, reads the token stored now,
/// refreshes only when no other process has done so meanwhile, and stores the new token before
/// it releases the lock. The others wait for the lock and read that token: as long as the holder holds it
/// and their own call's deadline allows, and at most ``lockWait`` when you set one. A process
/// that dies while it refreshes ends its session, and PostgreSQL releases its lock with it, so
/// a wait tied to the holder never outlives it.
///
/// Each process keeps the token it last read or stored in memory, so a call whose token is
/// good costs no round trip; it reads the table again when its token has expired or was
/// refused.
///
/// ```swift
/// let postgres = PostgresClient(configuration: configuration)   // run it beside your service
/// let tokens = PostgresAccessTokenStorage(client: postgres)
/// try await tokens.createTable()
/// let client = Client(baseURL: url) {
///     $0.accessTokens = AccessTokenSettings(storage: tokens, refresher: MyRefresher())
/// }
/// ```
///
/// The table holds tokens as they are: keep the database's access to the services that may
/// use them.
public final class PostgresAccessTokenStorage: SharedAccessTokenStorage {
    /// The client of the database every process shares; the caller runs it.
    public var client: PostgresClient { postgresTable.client }
    /// The table's name, a plain SQL identifier.
    public var table: String { postgresTable.name }
    /// How the storage meets its database, as every feature a fleet shares does: how long
    /// each statement, and the wait for a connection, may take before the database counts as
    /// failed (on the client's clock); what a refresh does while it fails
    /// (``Trellis/SharedStateSettings/whenStorageFails``); and how long the database is left
    /// alone after it failed.
    ///
    /// `.refuseCalls`, the default, fails a refresh rather than refresh without the fleet's
    /// lock, as an authorization server that rotates refresh tokens requires;
    /// `.continueInProcess` refreshes in this process alone and keeps the token in memory
    /// until the database answers again.
    public let settings: SharedStateSettings
    /// The longest a process waits for another's refresh (the advisory lock), or `nil`, the
    /// default, for no bound of its own: it waits while the holder holds the lock (PostgreSQL
    /// releases it when the holder's session ends) and the call that asked for the token has
    /// time left (its attempt's timeout), or 30 seconds when no call asked.
    public let lockWait: Duration?
    private let postgresTable: PostgresTable
    private var logger: Logger { postgresTable.logger }
    private let tokens = NIOLockedValueBox<[String: AccessToken]>([:])
    private let failures = StorageFailureWindow()

    /// A storage in `table` of the database `client` reaches, which meets its database as
    /// ``settings`` says (`retryStorageAfter` is zero by default: a refresh is rare, and each
    /// one asks the database again).
    ///
    /// - Precondition: `table` is a plain SQL identifier: letters, digits and underscores, not
    ///   starting with a digit.
    public init(
        client: PostgresClient,
        table: String = "trellis_access_tokens",
        timeLimit: Duration = .seconds(2),
        lockWait: Duration? = nil,
        whenStorageFails: SharedStateFailure = .refuseCalls,
        retryStorageAfter: Duration = .zero,
        logger: Logger = Logger(label: "trellis.postgres")
    ) {
        postgresTable = PostgresTable(client: client, name: table, store: "PostgresAccessTokenStorage", logger: logger)
        settings = SharedStateSettings(timeLimit: timeLimit, whenStorageFails: whenStorageFails, retryStorageAfter: retryStorageAfter)
        self.lockWait = lockWait
    }

    /// The earlier spelling of `settings.timeLimit`.
    @available(*, deprecated, renamed: "settings.timeLimit")
    public var timeLimit: Duration { settings.timeLimit }

    /// The earlier spelling of `settings.whenStorageFails`.
    @available(*, deprecated, renamed: "settings.whenStorageFails")
    public var whenStorageFails: SharedStateFailure { settings.whenStorageFails }

    /// The statement that creates the storage's table, for a migration of your own.
    public var migration: String {
        """
        CREATE TABLE IF NOT EXISTS \(table) (
            label text PRIMARY KEY,
            token text NOT NULL
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

    public func store(_ token: AccessToken, for label: String) async throws {
        tokens.withLockedValue { $0[label] = token }
        _ = try await tolerating("store the token of \(label)") {
            try await self.limited { try await self.write(token, for: label) }
        }
    }

    public func fetch(for label: String) async throws -> AccessToken? {
        if let token = tokens.withLockedValue({ $0[label] }) { return token }
        let token = try await tolerating("read the token of \(label)") {
            try await self.limited { try await self.read(label) }
        }
        if let token { tokens.withLockedValue { $0[label] = token } }
        return token
    }

    public func delete(for label: String) async throws {
        tokens.withLockedValue { $0[label] = nil }
        _ = try await tolerating("delete the token of \(label)") {
            var bindings = PostgresBindings()
            bindings.append(label)
            try await self.limited { [bindings] in _ = try await self.postgresTable.query("DELETE FROM \(self.table) WHERE label = $1", bindings) }
        }
    }

    public func refreshOnce(
        _ label: String,
        _ refresh: @escaping @Sendable (AccessToken?) async throws -> AccessToken
    ) async throws -> AccessToken {
        // The refresh's own errors go to the caller as they are; the database's are met as
        // `whenStorageFails` says. A token the refresh returned is never thrown away: the
        // authorization server may have spent the old refresh token on it.
        let refreshed = NIOLockedValueBox<Result<AccessToken, any Error>?>(nil)
        let clock = SharedStateClock.current
        if let failure = failures.failure(at: clock.instant) {
            return try await refreshWithoutTheFleet(label, refresh, because: "the database failed (\(failure)) and is left alone for retryStorageAfter: \(settings.retryStorageAfter)")
        }
        do {
            let token = try await underLock(label) { stored in
                do {
                    let token = try await refresh(stored)
                    refreshed.withLockedValue { $0 = .success(token) }
                    return token
                } catch {
                    refreshed.withLockedValue { $0 = .failure(error) }
                    throw error
                }
            }
            tokens.withLockedValue { $0[label] = token }
            return token
        } catch {
            switch refreshed.withLockedValue({ $0 }) {
            case .failure(let refusal)?:
                throw refusal
            case .success(let token)?:
                logger.warning("[Trellis] the access token of \(label) was refreshed but could not be stored in PostgreSQL (\(error)); this process keeps it, and the fleet refreshes again")
                tokens.withLockedValue { $0[label] = token }
                return token
            case nil:
                // The first failure (a wait that ran out, a statement's limit, a lost
                // connection), not a later statement's `25P02` that says only that. A wait for
                // another process's lock that ran out is no failure of the database.
                let first = AdvisoryLock.firstFailure(of: error)
                let waited = first is AdvisoryLock.WaitRanOut || (first as? LockLease.NotTaken)?.waitedForTheLock == true
                if !waited {
                    failures.failed("\(first)", at: clock.instant, for: settings.retryStorageAfter)
                }
                return try await refreshWithoutTheFleet(label, refresh, because: "refreshing \(label) under the fleet's lock failed (\(first))")
            }
        }
    }

    /// A refresh the fleet's lock could not cover, as ``settings`` says: refused, or made by
    /// this process alone.
    private func refreshWithoutTheFleet(
        _ label: String,
        _ refresh: @escaping @Sendable (AccessToken?) async throws -> AccessToken,
        because reason: String
    ) async throws -> AccessToken {
        guard settings.whenStorageFails == .continueInProcess else {
            throw AccessTokenStorageError(
                location: "PostgreSQL table \(table)",
                reason: "\(reason), and the token is not refreshed without it (whenStorageFails: .refuseCalls)"
            )
        }
        logger.warning("[Trellis] \(reason); this process refreshes the access token of \(label) alone")
        let token = try await refresh(tokens.withLockedValue { $0[label] })
        tokens.withLockedValue { $0[label] = token }
        return token
    }

    /// Runs `body` with the token stored under `label` while holding the label's advisory
    /// lock, and stores what it returns when that differs, before the lock is released. The
    /// connection that holds the lock and each statement are held to the time limit of
    /// ``settings``; the wait for the lock to ``lockWait(until:)`` (the server's `lock_timeout`)
    /// and the time limit beside it; `body` (the refresh) to the client's own timeouts.
    private func underLock(
        _ label: String,
        _ body: @escaping @Sendable (AccessToken?) async throws -> AccessToken
    ) async throws -> AccessToken {
        let (wait, setting) = lockWait(until: CallDeadline.current)
        let lease = try await LockLease.take(
            "\(table):\(label)", naming: label, on: client, connectingWithin: settings.timeLimit, waitingAtMost: wait,
            setting: setting, clock: SharedStateClock.current, logger: logger
        )
        defer { lease.release() }
        let stored = try await limited { try await self.read(label) }
        let token = try await body(stored)
        if token != stored { try await limited { try await self.write(token, for: label) } }
        return token
    }

    /// How long a refresh waits for the lock while another process holds it, and the setting
    /// that says so: what is left of the call's attempt (`deadline`), bounded by ``lockWait``
    /// when it is set; 30 seconds when neither is.
    private func lockWait(until deadline: ContinuousClock.Instant?) -> (Duration, String) {
        let left = deadline.map { max(.milliseconds(1), ContinuousClock.now.duration(to: $0)) }
        switch (left, lockWait) {
        case (let left?, let bound?) where bound < left: return (bound, "lockWait: \(bound)")
        case (let left?, _): return (left, "the call's timeout, \(left) left of it")
        case (nil, let bound?): return (bound, "lockWait: \(bound)")
        case (nil, nil): return (.seconds(30), "30 s, as no call's timeout bounds it and lockWait is not set")
        }
    }

    private func read(_ label: String) async throws -> AccessToken? {
        var bindings = PostgresBindings()
        bindings.append(label)
        let rows = try await postgresTable.query("SELECT token FROM \(table) WHERE label = $1", bindings)
        for try await text in rows.decode(String.self) {
            do {
                return try JSONDecoder().decode(AccessToken.self, from: Data(text.utf8))
            } catch {
                throw AccessTokenStorageError(location: "PostgreSQL table \(table)", reason: "the token of \(label) is not one Trellis wrote: \(error)")
            }
        }
        return nil
    }

    private func write(_ token: AccessToken, for label: String) async throws {
        var bindings = PostgresBindings()
        bindings.append(label)
        bindings.append(String(decoding: try JSONEncoder().encode(token), as: UTF8.self))
        try await postgresTable.query(
            "INSERT INTO \(table) (label, token) VALUES ($1, $2) ON CONFLICT (label) DO UPDATE SET token = excluded.token",
            bindings
        )
    }

    /// `operation` within the time limit of ``settings``, on the client's clock: a database
    /// that does not answer cannot hold the call. While the database is left alone after a
    /// failure, `operation` is not run.
    private func limited<Value: Sendable>(_ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let clock = SharedStateClock.current
        if let failure = failures.failure(at: clock.instant) {
            throw LeftAlone(retryStorageAfter: settings.retryStorageAfter, failure: failure)
        }
        do {
            return try await withTimeLimit(settings.timeLimit, on: clock, operation)
        } catch let error as AccessTokenStorageError {
            throw error
        } catch {
            failures.failed("\(error)", at: clock.instant, for: settings.retryStorageAfter)
            throw error
        }
    }

    /// `operation`, or, when the database fails and the storage goes on without it, `nil`.
    private func tolerating<Value>(_ what: String, _ operation: () async throws -> Value?) async throws -> Value? {
        do {
            return try await operation()
        } catch let error as AccessTokenStorageError {
            throw error
        } catch {
            guard settings.whenStorageFails == .continueInProcess else {
                throw AccessTokenStorageError(location: "PostgreSQL table \(table)", reason: "could not \(what): \(error)")
            }
            logger.warning("[Trellis] could not \(what) in PostgreSQL (\(error)); this process goes on with the token it holds")
            return nil
        }
    }

    /// The database is not asked: it failed a moment ago.
    private struct LeftAlone: Error, CustomStringConvertible {
        let retryStorageAfter: Duration
        let failure: String
        var description: String { "it is left alone for retryStorageAfter: \(retryStorageAfter) after it failed (\(failure))" }
    }
}

#endif
