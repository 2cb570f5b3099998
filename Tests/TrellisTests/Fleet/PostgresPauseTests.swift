#if Postgres
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO
import Testing
@testable import Trellis
import TrellisPostgres

/// Pauses shared through a real PostgreSQL server the test starts, by clients that stand for
/// the processes of a fleet, against a real HTTP server.
@Suite("Pauses shared through PostgreSQL", .hangGuard)
struct PostgresPauseTests {
    /// A `Retry-After: 30` one client is told refuses another client's call (the pause is longer
    /// than it waits). With the database stopped, a client set to go on alone goes on and one
    /// set to refuse refuses; once it is back, the pause in it holds the calls again.
    @Test func aPauseOneClientIsToldHoldsTheOthersAndTheStoppedDatabaseIsMetAsSaid() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let store = PostgresPauseStorage(client: postgres)
            try await store.createTable()
            try await SharedPauseTests.withServer { server in
                let events = RecordedResilienceEvents()
                // Short limits for the stopped database; while it runs, a loaded machine may take
                // longer than they allow, so the clients of that part are patient: a write of the
                // pause that ran out of 0.5 s was never retried, and the wait for it below hung.
                let sharing = { (failure: SharedStateFailure, limit: Duration) in
                    PauseSharing(storage: store, readEvery: .zero, timeLimit: limit, whenStorageFails: failure, retryStorageAfter: .zero)
                }
                let told = SharedPauseTests.client(server.url, sharing(.continueInProcess, .patientStoreLimit))
                let refusingPatiently = SharedPauseTests.client(server.url, sharing(.refuseCalls, .patientStoreLimit))
                let refusing = SharedPauseTests.client(server.url, sharing(.refuseCalls, .milliseconds(500)))
                let request = try Request(method: .get, url: server.url)
                #expect(try await told.data(for: request, accepting: [429]).status.code == 429)
                // The pause reaches the database in a task of its own.
                while try await store.pauses().isEmpty { try await Task.sleep(for: .milliseconds(10)) }
                #expect(try await refusalOf(refusingPatiently, request).reason == .rateLimited)
                #expect(server.requests.count == 1)

                try await database.stop()
                let alone = SharedPauseTests.client(server.url, sharing(.continueInProcess, .milliseconds(500)), events: events)
                _ = try await alone.data(for: request)
                #expect(events.names == ["shared_state_failed"])
                let refusal = try await refusalOf(refusing, request)
                #expect(refusal.detail.contains("their store failed"))
                #expect(server.requests.count == 2)

                try await database.start()
                // The pool reconnects on its own; a call may meet it still reconnecting.
                var held = false
                for _ in 0..<50 where !held {
                    held = (try? await refusalOf(refusing, request))?.detail.contains("their store failed") == false
                }
                #expect(held)
                #expect(server.requests.count == 2)
            }
        }
    }

    /// A circuit one client opened on a 503, told to a table of open circuits, refuses another
    /// client's call as an open circuit.
    @Test func aCircuitOneClientOpenedRefusesAnothersCall() async throws {
        try await PostgresServer.withDatabase { _, postgres in
            let store = PostgresPauseStorage(client: postgres, table: "trellis_open_circuits")
            try await store.createTable()
            try await SharedCircuitTests.withServer { server in
                let sharing = PauseSharing(storage: store, readEvery: .zero, timeLimit: .patientStoreLimit)
                let request = try Request(method: .get, url: server.url)
                #expect(try await SharedCircuitTests.client(server.url, sharing).data(for: request, accepting: [503]).status.code == 503)
                // The opening reaches the database in a task of its own.
                while try await store.pauses().isEmpty { try await Task.sleep(for: .milliseconds(10)) }
                #expect(try await refusalOf(SharedCircuitTests.client(server.url, sharing), request).reason == .circuitOpen)
                #expect(server.requests.count == 1)
            }
        }
    }
}
#endif
