import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import Trellis

/// Pauses shared through a ``SharedPauseStorage`` by several clients, each standing for a process
/// of a fleet, against a real in-process server. The store here keeps the pauses in memory, as
/// one piece: the PostgreSQL store has its own tests against a real database.
@Suite("Pauses shared through a store", .hangGuard)
struct SharedPauseTests {
    /// A store as a database would be: one pause per origin. It can be made to fail.
    final class MemoryPauseStorage: SharedPauseStorage {
        struct State {
            var ends: [String: ContinuousClock.Instant] = [:]
            var reads = 0
            var failing = false
        }
        let state = NIOLockedValueBox(State())
        /// Yields once for each pause the store is told of.
        let pausesTold: AsyncStream<Void>
        private let paused: AsyncStream<Void>.Continuation

        struct Unavailable: Error {}

        init() {
            (pausesTold, paused) = AsyncStream.makeStream()
        }

        func pause(_ origin: String, for duration: Duration) async throws {
            try state.withLockedValue { state in
                guard !state.failing else { throw Unavailable() }
                let ends = ContinuousClock.now + duration
                state.ends[origin] = max(state.ends[origin] ?? ends, ends)
            }
            paused.yield()
        }

        func pauses() async throws -> [String: Duration] {
            try state.withLockedValue { state in
                state.reads += 1
                guard !state.failing else { throw Unavailable() }
                let now = ContinuousClock.now
                return state.ends.compactMapValues { $0 > now ? $0 - now : nil }
            }
        }
    }

    /// A server that asks for a pause of 30 s on its first request and answers the others.
    static func withServer(_ body: (ScriptedServer) async throws -> Void) async throws {
        try await ScriptedServer.with(
            ScriptedServer.answering(first: ScriptedServer.response("429 Too Many Requests", ["Retry-After: 30"]), others: ScriptedServer.response("200 OK")),
            body
        )
    }

    static func client(
        _ url: URL, _ sharing: PauseSharing?, events: RecordedResilienceEvents? = nil, kind: TransportKind = .asyncHTTPClient
    ) -> Client {
        Client(baseURL: url, transport: kind.transport) {
            $0.resilience.sharedBackoff = SharedBackoff(maximumWait: .seconds(1), sharing: sharing)
            if let events { $0.observability.eventMonitors = [events] }
        }
    }

    /// One client is told to pause for 30 s: another client of the store, reading it, refuses
    /// its call at once (the pause is longer than it waits), while a client that shares nothing
    /// goes on. The server sees the first call and the unshared one alone.
    @Test(arguments: TransportKind.allCases)
    func aPauseOneClientIsToldHoldsTheOthers(_ kind: TransportKind) async throws {
        try await Self.withServer { server in
            let store = MemoryPauseStorage()
            let sharing = PauseSharing(storage: store, readEvery: .zero)
            let told = Self.client(server.url, sharing, kind: kind)
            let other = Self.client(server.url, sharing, kind: kind)
            let alone = Self.client(server.url, nil, kind: kind)
            let request = try Request(method: .get, url: server.url)
            let answer = try await told.data(for: request, accepting: [429])
            #expect(answer.status.code == 429)
            for await _ in store.pausesTold { break }

            let refusal = try await refusalOf(other, request)
            #expect(refusal.reason == .rateLimited)
            #expect(refusal.origin == request.origin)
            _ = try await alone.data(for: request)
            #expect(server.requests.count == 2)
        }
    }

    /// A call costs no round trip: the store is read at most once per `readEvery`, however
    /// many calls there are, and calls at once wait for one reading.
    @Test func theStoreIsReadOncePerReadEvery() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let store = MemoryPauseStorage()
            let client = Self.client(server.url, PauseSharing(storage: store, readEvery: .seconds(3600)))
            let request = try Request(method: .get, url: server.url)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 { group.addTask { _ = try await client.data(for: request) } }
                try await group.waitForAll()
            }
            for _ in 0..<10 { _ = try await client.data(for: request) }
            #expect(store.state.withLockedValue { $0.reads } == 1)
        }
    }

    /// The store fails: a client set to go on alone goes on, saying so in an event; one set to
    /// refuse calls refuses them. Both read the store again after `retryStorageAfter`.
    @Test func aFailingStoreIsMetAsEachClientSays() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let store = MemoryPauseStorage()
            store.state.withLockedValue { $0.failing = true }
            let events = RecordedResilienceEvents()
            let alone = Self.client(server.url, PauseSharing(storage: store, readEvery: .zero, retryStorageAfter: .zero), events: events)
            let refusing = Self.client(server.url, PauseSharing(storage: store, readEvery: .zero, whenStorageFails: .refuseCalls, retryStorageAfter: .zero))
            let request = try Request(method: .get, url: server.url)

            _ = try await alone.data(for: request)
            #expect(events.names == ["shared_state_failed"])
            let refusal = try await refusalOf(refusing, request)
            #expect(refusal.reason == .rateLimited)
            #expect(refusal.detail.contains("their store failed"))
            #expect(server.requests.count == 1)

            store.state.withLockedValue { $0.failing = false }
            _ = try await refusing.data(for: request)
            _ = try await alone.data(for: request)
            #expect(events.names == ["shared_state_failed"])
            #expect(server.requests.count == 3)
        }
    }
}
