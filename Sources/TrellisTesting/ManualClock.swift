public import Foundation
import NIOConcurrencyHelpers
public import Trellis

/// A ``ClientClock`` that moves only when the test moves it, so that a test drives what a
/// client times (a breaker's cool-down, a `Retry-After: 30` pause, a hedge's delay, a retry's
/// backoff, a cached response's age) in milliseconds of real time, with no sleeps.
///
/// ```swift
/// let clock = ManualClock()
/// let client = Client(baseURL: url) {
///     $0.clock = clock
///     $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(3), coolDown: .seconds(30))
/// }
/// // … three failures open the circuit …
/// clock.advance(by: .seconds(30))   // the cool-down is over: the next call is a probe
/// ```
///
/// A task that sleeps on the clock waits until ``advance(by:)`` passes its time;
/// ``sleepers(reaching:longerThan:)`` tells the test when the code under test has started waiting. Made
/// with `advancesWhenSleeping`, the clock moves itself by each sleep instead, which returns at
/// once: retries' backoff goes by without any test code. Either way, ``sleeps`` lists every
/// wait asked for.
public final class ManualClock: ClientClock {
    private struct Sleeper {
        let id: Int
        let duration: Duration
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Watcher {
        let count: Int
        let longerThan: Duration
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var elapsed = Duration.zero
        var sleepers: [Sleeper] = []
        var watchers: [Watcher] = []
        var sleeps: [Duration] = []
        var nextID = 0
    }

    private let state = NIOLockedValueBox(State())
    private let startDate: Date
    private let startInstant = ContinuousClock.now
    private let advancesWhenSleeping: Bool

    /// A clock standing at `date` (now, unless given). With `advancesWhenSleeping`, each sleep
    /// moves the clock by its length and returns at once; without, it waits for ``advance(by:)``.
    public init(startingAt date: Date = Date(), advancesWhenSleeping: Bool = false) {
        startDate = date
        self.advancesWhenSleeping = advancesWhenSleeping
    }

    /// How far the clock has moved since it was made.
    public var elapsed: Duration { state.withLockedValue { $0.elapsed } }

    /// Every wait asked of the clock so far, in order.
    public var sleeps: [Duration] { state.withLockedValue { $0.sleeps } }

    public var now: Date { startDate.addingTimeInterval(Self.seconds(elapsed)) }

    public var instant: ContinuousClock.Instant { startInstant + elapsed }

    public func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        let id = state.withLockedValue { state in
            state.sleeps.append(duration)
            state.nextID += 1
            return state.nextID
        }
        if advancesWhenSleeping {
            advance(by: duration)
            return
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (due, watchers) = state.withLockedValue { state -> (Bool, [Watcher]) in
                    let deadline = state.elapsed + max(.zero, duration)
                    guard deadline > state.elapsed else { return (true, []) }
                    state.sleepers.append(Sleeper(id: id, duration: duration, deadline: deadline, continuation: continuation))
                    return (false, Self.takeWatchers(&state))
                }
                if due { continuation.resume() }
                for watcher in watchers { watcher.continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLockedValue { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock on by `duration` (nothing for a negative one), and wakes every sleeper
    /// whose time has come, earliest first.
    public func advance(by duration: Duration) {
        let due = state.withLockedValue { state -> [Sleeper] in
            state.elapsed += max(.zero, duration)
            let elapsed = state.elapsed
            let due = state.sleepers.filter { $0.deadline <= elapsed }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= elapsed }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once at least `count` tasks are sleeping on the clock for longer than
    /// `longerThan`: the sign that the code under test has reached its wait, so that moving the
    /// clock now ends it.
    ///
    /// A client that shares state through a storage also sleeps on its clock while each
    /// operation on the storage is under way (the operation's time limit, which moving the
    /// clock ends too): pass that limit as `longerThan` to wait for the other waits only.
    public func sleepers(reaching count: Int, longerThan: Duration = .zero) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLockedValue { state in
                guard Self.count(state.sleepers, longerThan: longerThan) < count else { return true }
                state.watchers.append(Watcher(count: count, longerThan: longerThan, continuation: continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// The watchers whose count the sleepers now reach, taken out of `state`.
    private static func takeWatchers(_ state: inout State) -> [Watcher] {
        let sleepers = state.sleepers
        let isReady = { (watcher: Watcher) in watcher.count <= count(sleepers, longerThan: watcher.longerThan) }
        let ready = state.watchers.filter(isReady)
        state.watchers.removeAll(where: isReady)
        return ready
    }

    private static func count(_ sleepers: [Sleeper], longerThan minimum: Duration) -> Int {
        minimum == .zero ? sleepers.count : sleepers.reduce(0) { $0 + ($1.duration > minimum ? 1 : 0) }
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
