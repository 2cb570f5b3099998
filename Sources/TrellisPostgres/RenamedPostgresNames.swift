#if Postgres
public import Logging
public import PostgresNIO
public import Trellis

// The names these storages had before every shared feature said "storage"; kept, deprecated,
// so that code written against them still builds.

/// The earlier spelling of `PostgresPauseStorage`.
@available(*, deprecated, renamed: "PostgresPauseStorage")
public typealias PostgresPauseStore = PostgresPauseStorage

/// The earlier spelling of `PostgresRateLimitStorage`.
@available(*, deprecated, renamed: "PostgresRateLimitStorage")
public typealias PostgresRateLimitStore = PostgresRateLimitStorage

extension PostgresAccessTokenStorage {
    /// The earlier spelling of `init(client:table:timeLimit:lockWait:whenStorageFails:logger:)`.
    @available(*, deprecated, renamed: "init(client:table:timeLimit:lockWait:whenStorageFails:logger:)")
    public convenience init(
        client: PostgresClient,
        table: String = "trellis_access_tokens",
        timeLimit: Duration = .seconds(2),
        lockWait: Duration? = nil,
        whenDatabaseFails: SharedStateFailure,
        logger: Logger = Logger(label: "trellis.postgres")
    ) {
        self.init(client: client, table: table, timeLimit: timeLimit, lockWait: lockWait, whenStorageFails: whenDatabaseFails, logger: logger)
    }

    /// The earlier spelling of `whenStorageFails`.
    @available(*, deprecated, renamed: "whenStorageFails")
    public var whenDatabaseFails: SharedStateFailure { whenStorageFails }
}
#endif
