import Logging
import NIOConcurrencyHelpers

/// The fleet's pauses as this process last read them from a ``SharedPauseStorage``, the reading
/// under way, if any, and the store's failure. One per client and policy (the shared pause, the
/// circuit breaker's openings), shared with the clients derived from it.
final class FleetPauses: Sendable {
    private struct State {
        /// When each origin the fleet has paused may be called again.
        var until: [String: ContinuousClock.Instant] = [:]
        var readAt: ContinuousClock.Instant?
        /// The reading under way, and the store's failure.
        var store = StoreAccess()
    }

    /// What a call learns of the fleet's pause of its origin.
    enum Reading {
        /// When the fleet's pause of the origin ends, if it has one.
        case paused(until: ContinuousClock.Instant?)
        /// The store failed, as `detail` says.
        case storeFailed(detail: String)
    }

    let sharing: PauseSharing
    private let clock: any ClientClock
    private let logger: Logger
    /// The policy whose pauses these are, for log lines.
    private let policy: String
    private let state = NIOLockedValueBox(State())

    init(_ sharing: PauseSharing, clock: any ClientClock, logger: Logger, policy: String) {
        self.sharing = sharing
        self.clock = clock
        self.logger = logger
        self.policy = policy
    }

    /// The fleet's pause of `origin`, from a reading no older than ``PauseSharing/readEvery``:
    /// this caller takes one when none is under way and waits for it, or waits for the one under
    /// way.
    func pause(of origin: String) async -> Reading {
        // Whether this caller has waited for a reading: it takes that reading's result however
        // old `readEvery` makes it (at zero it would read again, endlessly).
        var waitedForAReading = false
        while true {
            let now = clock.instant
            enum Step {
                case done(Reading)
                case wait(Task<Void, Never>)
            }
            let step = state.withLockedValue { [waitedForAReading] state -> Step in
                if let failure = state.store.failure(at: now, waitedAlready: waitedForAReading) {
                    return .done(.storeFailed(detail: failure))
                }
                if let readAt = state.readAt, waitedForAReading || now - readAt < sharing.readEvery {
                    return .done(.paused(until: state.until[origin].flatMap { $0 > now ? $0 : nil }))
                }
                return .wait(state.store.join { Task { await self.read() } })
            }
            switch step {
            case .done(let reading):
                return reading
            case .wait(let reading):
                await reading.value
                waitedForAReading = true
            }
        }
    }

    /// Tells the store that `origin` asked for a pause of `duration`, without holding the call
    /// that learnt it: within the store's time limit, in a task of its own.
    func announce(_ origin: String, pause duration: Duration) {
        let sharing = sharing
        let clock = clock
        let policy = policy
        let logger = logger
        Task {
            do {
                try await withTimeLimit(sharing.settings.timeLimit, on: clock) { try await sharing.storage.pause(origin, for: duration) }
            } catch {
                logger.warning("the \(policy)'s store could not be told of \(origin)'s pause of \(duration) (\(error)); the other processes do not learn of it")
            }
        }
    }

    /// Reads the fleet's pauses within the store's time limit; on a failure, the store is left
    /// alone for ``SharedStateSettings/retryStorageAfter``.
    private func read() async {
        let result: Result<[String: Duration], any Error>
        do {
            result = .success(try await withTimeLimit(sharing.settings.timeLimit, on: clock) { try await self.sharing.storage.pauses() })
        } catch {
            result = .failure(error)
        }
        let received = clock.instant
        state.withLockedValue { state in
            switch result {
            case .success(let pauses):
                // The store's pauses replace the last reading's: the table is as large as the
                // fleet's pauses in force, no larger.
                state.until = pauses.compactMapValues { $0 > .zero ? received + $0 : nil }
                state.readAt = received
                state.store.finished(failure: nil, at: received, retryAfter: sharing.settings.retryStorageAfter)
            case .failure(let error):
                state.store.finished(failure: "\(error)", at: received, retryAfter: sharing.settings.retryStorageAfter)
            }
        }
        if case .failure(let error) = result {
            logger.warning("the \(policy)'s store could not be read (\(error)); it is read again in \(sharing.settings.retryStorageAfter), and until then \(sharing.settings.whenStorageFails == .continueInProcess ? "this process goes on alone" : "calls under it are refused")")
        }
    }
}
