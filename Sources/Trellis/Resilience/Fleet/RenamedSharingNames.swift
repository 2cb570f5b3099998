// The names the fleet's settings had before every shared feature said "storage" and held one
// ``SharedStateSettings``; kept, deprecated, so that code written against them still builds.

/// The earlier spelling of `SharedPauseStorage`.
@available(*, deprecated, renamed: "SharedPauseStorage")
public typealias SharedPauseStore = SharedPauseStorage

/// The earlier spelling of `RateLimitStorage`.
@available(*, deprecated, renamed: "RateLimitStorage")
public typealias RateLimitStore = RateLimitStorage

extension PauseSharing {
    /// The earlier spelling of `init(storage:readEvery:timeLimit:whenStorageFails:retryStorageAfter:)`.
    @available(*, deprecated, renamed: "init(storage:readEvery:timeLimit:whenStorageFails:retryStorageAfter:)")
    public init(
        store: any SharedPauseStorage,
        readEvery: Duration = .milliseconds(250),
        timeLimit: Duration = .seconds(1),
        whenStoreFails: SharedStateFailure = .continueInProcess,
        retryStoreAfter: Duration = .seconds(1)
    ) {
        self.init(storage: store, readEvery: readEvery, timeLimit: timeLimit, whenStorageFails: whenStoreFails, retryStorageAfter: retryStoreAfter)
    }

    /// The earlier spelling of `storage`.
    @available(*, deprecated, renamed: "storage")
    public var store: any SharedPauseStorage { storage }

    /// The earlier spelling of `settings.whenStorageFails`.
    @available(*, deprecated, renamed: "settings.whenStorageFails")
    public var whenStoreFails: SharedStateFailure { settings.whenStorageFails }

    /// The earlier spelling of `settings.retryStorageAfter`.
    @available(*, deprecated, renamed: "settings.retryStorageAfter")
    public var retryStoreAfter: Duration { settings.retryStorageAfter }

    /// The earlier spelling of `settings.timeLimit`.
    @available(*, deprecated, renamed: "settings.timeLimit")
    public var timeLimit: Duration { settings.timeLimit }
}

extension RateLimitSharing {
    /// The earlier spelling of `init(storage:batch:timeLimit:whenStorageFails:retryStorageAfter:)`.
    @available(*, deprecated, renamed: "init(storage:batch:timeLimit:whenStorageFails:retryStorageAfter:)")
    public init(
        store: any RateLimitStorage,
        batch: Int = 10,
        timeLimit: Duration = .seconds(1),
        whenStoreFails: SharedStateFailure = .continueInProcess,
        retryStoreAfter: Duration = .seconds(1)
    ) {
        self.init(storage: store, batch: batch, timeLimit: timeLimit, whenStorageFails: whenStoreFails, retryStorageAfter: retryStoreAfter)
    }

    /// The earlier spelling of `storage`.
    @available(*, deprecated, renamed: "storage")
    public var store: any RateLimitStorage { storage }

    /// The earlier spelling of `settings.whenStorageFails`.
    @available(*, deprecated, renamed: "settings.whenStorageFails")
    public var whenStoreFails: SharedStateFailure { settings.whenStorageFails }

    /// The earlier spelling of `settings.retryStorageAfter`.
    @available(*, deprecated, renamed: "settings.retryStorageAfter")
    public var retryStoreAfter: Duration { settings.retryStorageAfter }

    /// The earlier spelling of `settings.timeLimit`.
    @available(*, deprecated, renamed: "settings.timeLimit")
    public var timeLimit: Duration { settings.timeLimit }
}
