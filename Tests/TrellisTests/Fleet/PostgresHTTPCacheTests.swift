#if Postgres
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO
import Testing
import Trellis
import TrellisPostgres

/// The HTTP cache kept in a real PostgreSQL server the test starts, by clients that stand for
/// the processes of a fleet (each with its own `HTTPCache` and storage), against a real HTTP
/// server.
@Suite("The HTTP cache shared through PostgreSQL", .hangGuard)
struct PostgresHTTPCacheTests {
    /// A server that answers every path with its own body of `size` bytes, fresh for a
    /// minute, held back until the test lets it go when `holding`.
    static func withServer(size: Int = 100, holding: Bool = false, _ body: (ScriptedServer) async throws -> Void) async throws {
        try await ScriptedServer.with({ received in
            let answer = ScriptedServer.response(
                "200 OK", ["Cache-Control: max-age=60"], body: String(repeating: "x", count: max(0, size - received.target.utf8.count)) + received.target
            )
            return holding ? ScriptedServer.held(answer) : answer
        }, body)
    }

    static func client(_ url: URL, _ storage: PostgresHTTPCacheStorage, timeLimit: Duration = .patientStoreLimit) -> Client {
        Client(baseURL: url) { $0.cache = HTTPCache(storage: storage, timeLimit: timeLimit) }
    }

    /// A response one client fetched is served to another from the database, and is what the
    /// server sent.
    @Test func aResponseOneClientFetchedIsServedToAnother() async throws {
        try await PostgresServer.withDatabase { _, postgres in
            let storage = PostgresHTTPCacheStorage(client: postgres, timeLimit: .patientStoreLimit)
            try await storage.createTable()
            try await Self.withServer { server in
                let request = try Request(method: .get, url: server.url.appending(path: "article"))
                let first = try await Self.client(server.url, storage).data(for: request)
                let second = try await Self.client(server.url, PostgresHTTPCacheStorage(client: postgres, timeLimit: .patientStoreLimit)).data(for: request)
                #expect(second.body == first.body)
                #expect(String(decoding: second.body, as: UTF8.self).hasSuffix("/article"))
                #expect(server.requests.count == 1)
            }
        }
    }

    /// Processes of a fleet on different transports share one entry, and it says what its
    /// bytes are: whichever transport stored it, the other is served the server's JSON.
    @Test(arguments: TransportKind.allCases)
    func processesOnBothTransportsAreServedTheSameBody(writer: TransportKind) async throws {
        try await PostgresServer.withDatabase { _, postgres in
            let storage = PostgresHTTPCacheStorage(client: postgres, timeLimit: .patientStoreLimit)
            try await storage.createTable()
            let routes = try CompressedRoutes()
            try await TestServer.with(routes.install) { url in
                func process(on kind: TransportKind) -> Client {
                    let storage = PostgresHTTPCacheStorage(client: postgres, timeLimit: .patientStoreLimit)
                    return Client(baseURL: url, transport: kind.transport) { $0.cache = HTTPCache(storage: storage, timeLimit: .patientStoreLimit) }
                }
                let request = try Request(method: .get, url: url.appending(path: "z/negotiated"))
                let first = try await process(on: writer).data(for: request)
                let reader = TransportKind.allCases.first { $0 != writer }!
                let second = try await process(on: reader).data(for: request)
                #expect(String(decoding: first.body, as: UTF8.self) == CompressedRoutes.post)
                #expect(String(decoding: second.body, as: UTF8.self) == CompressedRoutes.post)
                #expect(second.headerFields[.age] != nil, "served from the database")
                #expect(routes.negotiatedFetches.withLockedValue { $0 } == 1)
            }
        }
    }

    /// Two clients miss one URL at once while the server holds its answer: the second waits
    /// for the first's fetch (the fleet's lock) and is served what it stored; the server sees
    /// one request.
    @Test func clientsThatMissAtOnceFetchOnce() async throws {
        try await PostgresServer.withDatabase { _, postgres in
            let storage = PostgresHTTPCacheStorage(client: postgres, timeLimit: .patientStoreLimit)
            try await storage.createTable()
            try await Self.withServer(holding: true) { server in
                let request = try Request(method: .get, url: server.url.appending(path: "report"))
                let clients = [Self.client(server.url, storage), Self.client(server.url, PostgresHTTPCacheStorage(client: postgres, timeLimit: .patientStoreLimit))]
                try await withThrowingTaskGroup(of: Data.self) { group in
                    group.addTask { try await clients[0].data(for: request).body }
                    for await _ in server.arrivals { break }
                    group.addTask { try await clients[1].data(for: request).body }
                    try await PostgresFleetTests.untilAWaiterQueuesForTheLock(postgres)
                    server.releaseHeld()
                    let bodies = try await group.reduce(into: []) { $0.append($1) }
                    #expect(bodies.count == 2 && bodies[0] == bodies[1])
                }
                #expect(server.requests.count == 1)
            }
        }
    }

    /// Forty responses of about a kilobyte through a storage of eight: the table stays within
    /// its capacity, the latest entry is served from it and the first has gone.
    @Test func theSizeBoundHoldsAndTheLeastRecentlyUsedGo() async throws {
        try await PostgresServer.withDatabase { _, postgres in
            let storage = PostgresHTTPCacheStorage(client: postgres, capacity: 8 << 10, timeLimit: .patientStoreLimit)
            try await storage.createTable()
            try await Self.withServer(size: 1000) { server in
                let client = Self.client(server.url, storage)
                for number in 0..<40 {
                    _ = try await client.data(for: try Request(method: .get, url: server.url.appending(path: "item/\(number)")))
                }
                let rows = try await postgres.query("SELECT coalesce(sum(size), 0)::bigint, count(*)::bigint FROM trellis_http_cache")
                for try await (size, count) in rows.decode((Int64, Int64).self) {
                    #expect(size <= 8 << 10)
                    #expect(count >= 4)
                }
                _ = try await client.data(for: try Request(method: .get, url: server.url.appending(path: "item/39")))
                #expect(server.requests.count == 40)
                _ = try await client.data(for: try Request(method: .get, url: server.url.appending(path: "item/0")))
                #expect(server.requests.count == 41)
            }
        }
    }

    /// With the database stopped, a lookup is a miss within the time limit and the call goes
    /// to the server; once it is back, the cache serves again.
    @Test func aStoppedDatabaseIsAMiss() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let storage = PostgresHTTPCacheStorage(client: postgres, timeLimit: .milliseconds(500))
            try await storage.createTable()
            try await Self.withServer { server in
                let client = Self.client(server.url, storage, timeLimit: .milliseconds(500))
                let request = try Request(method: .get, url: server.url.appending(path: "page"))
                _ = try await client.data(for: request)
                try await database.stop()
                _ = try await client.data(for: request)
                #expect(server.requests.count == 2)
                try await database.start()
                // The pool reconnects on its own: once it has, the page is stored and served.
                var served = false
                for _ in 0..<50 where !served {
                    let before = server.requests.count
                    _ = try await client.data(for: request)
                    served = server.requests.count == before
                }
                #expect(served)
            }
        }
    }
}
#endif
