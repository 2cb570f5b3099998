import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import Trellis

/// A circuit breaker whose openings are shared through a ``SharedPauseStorage`` by several
/// clients, each standing for a process of a fleet, against a real in-process server.
@Suite("Circuit openings shared through a store", .hangGuard)
struct SharedCircuitTests {
    /// A server whose first request fails with a 503 and whose others are answered.
    static func withServer(_ body: (ScriptedServer) async throws -> Void) async throws {
        try await ScriptedServer.with(
            ScriptedServer.answering(first: ScriptedServer.response("503 Service Unavailable"), others: ScriptedServer.response("200 OK")), body
        )
    }

    static func client(
        _ url: URL, _ sharing: PauseSharing?, events: RecordedResilienceEvents? = nil, kind: TransportKind = .asyncHTTPClient
    ) -> Client {
        Client(baseURL: url, transport: kind.transport) {
            $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(1), coolDown: .seconds(30), sharing: sharing)
            if let events { $0.observability.eventMonitors = [events] }
        }
    }

    /// One client's circuit opens on a 503: another client of the store refuses its call as
    /// an open circuit, naming the fleet, while a client that shares nothing goes on.
    @Test(arguments: TransportKind.allCases)
    func aCircuitOneClientOpenedRefusesTheOthersCalls(_ kind: TransportKind) async throws {
        try await Self.withServer { server in
            let store = SharedPauseTests.MemoryPauseStorage()
            let sharing = PauseSharing(storage: store, readEvery: .zero)
            let opened = Self.client(server.url, sharing, kind: kind)
            let other = Self.client(server.url, sharing, kind: kind)
            let alone = Self.client(server.url, nil, kind: kind)
            let request = try Request(method: .get, url: server.url)
            #expect(try await opened.data(for: request, accepting: [503]).status.code == 503)
            for await _ in store.pausesTold { break }

            let refusal = try await refusalOf(other, request)
            #expect(refusal.reason == .circuitOpen)
            #expect(refusal.detail.contains("opened by a process of the fleet"))
            _ = try await alone.data(for: request)
            #expect(server.requests.count == 2)
        }
    }

    /// The store fails: a client set to go on alone goes on with its own circuit, saying so;
    /// one set to refuse refuses.
    @Test func aFailingStoreIsMetAsEachClientSays() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let store = SharedPauseTests.MemoryPauseStorage()
            store.state.withLockedValue { $0.failing = true }
            let events = RecordedResilienceEvents()
            let alone = Self.client(server.url, PauseSharing(storage: store, readEvery: .zero), events: events)
            let refusing = Self.client(server.url, PauseSharing(storage: store, readEvery: .zero, whenStorageFails: .refuseCalls))
            let request = try Request(method: .get, url: server.url)
            _ = try await alone.data(for: request)
            #expect(events.names == ["shared_state_failed"])
            #expect(try await refusalOf(refusing, request).detail.contains("their store failed"))
            #expect(server.requests.count == 1)
        }
    }
}
