import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
@testable import Trellis
import TrellisTesting

/// A rate limit shared through a ``RateLimitStorage`` by several clients, each standing for a
/// process of a fleet, against a real in-process server. The store here keeps the schedule in
/// memory, as one piece: the PostgreSQL store has its own tests against a real database.
@Suite("A rate limit shared through a store", .hangGuard)
struct SharedRateLimitTests {
    /// A store as a database would be: one schedule per key, each batch taken under one lock.
    /// It can be made to fail, or to hang until the test lets it go.
    final class ScheduleStore: RateLimitStorage {
        struct State {
            var nextTurn: [String: ContinuousClock.Instant] = [:]
            /// Every turn given, as the store's clock placed it.
            var turnsGiven: [ContinuousClock.Instant] = []
            var batchesTaken = 0
            var holds: [(key: String, duration: Duration)] = []
            var failing = false
            var askedWhileFailing = 0
        }
        let state = NIOLockedValueBox(State())
        let clock: any ClientClock
        /// When set, taking turns waits for it, whatever cancels it.
        let gate: AsyncStream<Void>?
        let holdsMade: AsyncStream<Void>
        private let holdMade: AsyncStream<Void>.Continuation

        struct Unavailable: Error {}

        init(clock: any ClientClock, gate: AsyncStream<Void>? = nil) {
            self.clock = clock
            self.gate = gate
            (holdsMade, holdMade) = AsyncStream.makeStream()
        }

        func takeTurns(_ count: Int, of key: String, under limit: RateLimit) async throws -> [Duration] {
            if let gate { for await _ in gate { break } }
            return try state.withLockedValue { state in
                guard !state.failing else {
                    state.askedWhileFailing += 1
                    throw Unavailable()
                }
                state.batchesTaken += 1
                let now = clock.instant
                let first = max(state.nextTurn[key] ?? now, now)
                let turns = (0..<count).map { first + limit.interval * $0 }
                state.nextTurn[key] = first + limit.interval * count
                state.turnsGiven += turns
                return turns.map { $0 - now }
            }
        }

        func hold(_ key: String, for duration: Duration, under limit: RateLimit) async throws {
            state.withLockedValue { $0.holds.append((key, duration)) }
            holdMade.yield()
        }
    }

    /// Three clients share 50 requests a second, 5 turns a batch, each making ten calls in
    /// turn: each batch costs the store one round trip (six for thirty calls), and no request
    /// reaches the server before the turn the store gave it.
    @Test func clientsTakeTheirTurnsFromOneScheduleABatchAtATime() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", body: "ok") }) { server in
            let store = ScheduleStore(clock: SystemClock())
            let clients = (0..<3).map { _ in
                Client(baseURL: server.url) {
                    $0.resilience.rateLimit = RateLimit(requests: 50, per: .seconds(1), sharing: RateLimitSharing(storage: store, batch: 5))
                }
            }
            let request = try Request(method: .get, url: server.url)
            for client in clients {
                for _ in 0..<10 { _ = try await client.data(for: request) }
            }
            let given = store.state.withLockedValue { $0.turnsGiven }
            #expect(store.state.withLockedValue { $0.batchesTaken } == 6)
            #expect(given.count == 30)
            let arrivals = server.requests.map(\.arrived)
            #expect(arrivals.count == 30)
            // The store's turns are 20 ms apart, fleet-wide; each request went at or after its own.
            for (arrived, turn) in zip(arrivals, given) { #expect(arrived >= turn) }
        }
    }

    /// Twenty calls at once in one client: the callers that find no turn left wait for one
    /// batch together, so four batches of five serve them all.
    @Test func callersAtOnceShareOneBatchBeingTaken() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let store = ScheduleStore(clock: SystemClock())
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(requests: 20, per: .seconds(1), sharing: RateLimitSharing(storage: store, batch: 5))
            }
            let request = try Request(method: .get, url: server.url)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 { group.addTask { _ = try await client.data(for: request) } }
                try await group.waitForAll()
            }
            #expect(server.requests.count == 20)
            #expect(store.state.withLockedValue { $0.batchesTaken } == 4)
        }
    }

    /// A client and the clients derived from it (a service's) draw on one batch.
    @Test func derivedClientsShareTheProcesssBatch() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let store = ScheduleStore(clock: SystemClock())
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(requests: 100, per: .seconds(1), burst: 10, sharing: RateLimitSharing(storage: store, batch: 5))
            }
            let derived = client.adding(middlewares: [try APIKey(.header("X-Key"), "service")])
            let request = try Request(method: .get, url: server.url)
            for _ in 0..<2 {
                _ = try await client.data(for: request)
                _ = try await derived.data(for: request)
            }
            #expect(store.state.withLockedValue { $0.batchesTaken } == 1)
        }
    }

    /// The store fails: with `continueInProcess`, calls go on under the process's own limit,
    /// each says so in an event, and the store is not asked again until `retryStorageAfter` has
    /// passed; then it is used again.
    @Test func whenTheStoreFailsTheProcessGoesOnAloneAndTriesTheStoreAgainLater() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let clock = ManualClock()
            let store = ScheduleStore(clock: clock)
            store.state.withLockedValue { $0.failing = true }
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(
                    requests: 10, per: .seconds(1), burst: 10,
                    sharing: RateLimitSharing(storage: store, whenStorageFails: .continueInProcess, retryStorageAfter: .seconds(5))
                )
                $0.clock = clock
                $0.observability.eventMonitors = [events]
            }
            let request = try Request(method: .get, url: server.url)
            _ = try await client.data(for: request)
            _ = try await client.data(for: request)
            #expect(server.requests.count == 2)
            #expect(events.names == ["shared_state_failed", "shared_state_failed"])
            // The store came back; the client asks it again once its wait is over.
            store.state.withLockedValue { $0.failing = false }
            _ = try await client.data(for: request)
            #expect(store.state.withLockedValue { $0.batchesTaken } == 0)
            clock.advance(by: .seconds(5))
            _ = try await client.data(for: request)
            #expect(store.state.withLockedValue { $0.batchesTaken } == 1)
            #expect(events.names.count == 3)
        }
    }

    /// With `retryStorageAfter` zero, every call asks the failing store once, and goes on alone.
    @Test func aStoreAskedAgainAtOnceIsAskedOncePerCall() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let store = ScheduleStore(clock: SystemClock())
            store.state.withLockedValue { $0.failing = true }
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(
                    requests: 100, per: .seconds(1), burst: 10, sharing: RateLimitSharing(storage: store, retryStorageAfter: .zero)
                )
            }
            let request = try Request(method: .get, url: server.url)
            for _ in 0..<3 { _ = try await client.data(for: request) }
            #expect(server.requests.count == 3)
            #expect(store.state.withLockedValue { $0.askedWhileFailing } == 3)
        }
    }

    /// With `refuseCalls`, a call the store cannot give a turn to is refused, and nothing is
    /// sent.
    @Test func whenTheStoreFailsCallsCanBeRefused() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let store = ScheduleStore(clock: SystemClock())
            store.state.withLockedValue { $0.failing = true }
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(
                    requests: 10, per: .seconds(1), sharing: RateLimitSharing(storage: store, whenStorageFails: .refuseCalls)
                )
            }
            let refusal = try await refusalOf(client, Request(method: .get, url: server.url))
            #expect(refusal.reason == .rateLimit)
            #expect(refusal.description.contains("failed"))
            #expect(server.requests.isEmpty)
        }
    }

    /// A store that does not answer, and ignores cancellation, holds a call no longer than the
    /// sharing's time limit, on the client's clock.
    @Test func aStoreThatHangsHoldsACallNoLongerThanItsTimeLimit() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let clock = ManualClock()
            let (gate, opening) = AsyncStream<Void>.makeStream()
            let store = ScheduleStore(clock: clock, gate: gate)
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(
                    requests: 10, per: .seconds(1),
                    sharing: RateLimitSharing(storage: store, timeLimit: .milliseconds(250), whenStorageFails: .refuseCalls)
                )
                $0.clock = clock
            }
            let request = try Request(method: .get, url: server.url)
            let call = Task { try await refusalOf(client, request) }
            await clock.sleepers(reaching: 1)
            #expect(clock.sleeps == [.milliseconds(250)])
            clock.advance(by: .milliseconds(250))
            let refusal = try await call.value
            #expect(refusal.description.contains("no answer within 0.25 seconds"))
            #expect(server.requests.isEmpty)
            opening.finish()
        }
    }

    /// An answer that says the quota is spent holds the key in the store, for the other
    /// processes to learn it.
    @Test func aSpentQuotaIsHeldInTheStore() async throws {
        try await ScriptedServer.with({ _ in
            ScriptedServer.response("200 OK", ["X-RateLimit-Remaining: 0", "X-RateLimit-Reset: 30"])
        }) { server in
            let store = ScheduleStore(clock: SystemClock())
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(
                    requests: 10, per: .seconds(1), key: { _ in "account-7" }, sharing: RateLimitSharing(storage: store)
                )
            }
            _ = try await client.data(for: Request(method: .get, url: server.url))
            var holds = store.holdsMade.makeAsyncIterator()
            _ = await holds.next()
            let held = store.state.withLockedValue { $0.holds }
            #expect(held.map(\.key) == ["account-7"])
            #expect(held.map(\.duration) == [.seconds(30)])
        }
    }
}
