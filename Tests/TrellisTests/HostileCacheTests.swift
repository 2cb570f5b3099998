import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
import Trellis

/// Regression tests for the holes hostile servers found in the cache and in the numbers read
/// from the network (the second hostile-servers issue), against ``ScriptedServer``.
@Suite("Hostile servers: the cache and numbers from the network", .hangGuard)
struct HostileCacheTests {
    private func get(_ server: ScriptedServer, _ path: String) throws -> Request {
        try Request(method: .get, url: URL(string: server.url.absoluteString + path)!)
    }

    /// A stored response that must be revalidated, then a `304` with `age` as its `Age`.
    private static func revalidatedWithAge(_ age: String) -> ScriptedServer.Script {
        { request in
            if request.field("If-None-Match") == "\"v1\"" {
                return ScriptedServer.response("304 Not Modified", ["ETag: \"v1\"", "Age: \(age)"])
            }
            return ScriptedServer.response("200 OK", ["Cache-Control: max-age=0", "ETag: \"v1\""], body: "stored")
        }
    }

    // Each of these Ages trapped the process when the revalidated response was served.
    @Test(arguments: TransportKind.allCases, ["100000000000000000000", "1e400", "inf", "nan", "7200.0", "-5"])
    func anAgeNoIntegerHoldsIsSaturatedOrIgnoredNeverATrap(_ kind: TransportKind, _ age: String) async throws {
        try await ScriptedServer.with(Self.revalidatedWithAge(age)) { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.useFrozenCache() }
            _ = try await client.data(for: get(server, "/r"))
            let revalidated = try await client.data(for: get(server, "/r"))
            #expect(String(decoding: revalidated.body, as: UTF8.self) == "stored")
            #expect(server.requests.count == 2)
            let served = try #require(revalidated.headerFields[.age].flatMap { Int($0) })
            if age == "100000000000000000000" {
                // The largest delta-seconds value (RFC 9111 section 1.2.2).
                #expect(served == 2_147_483_648)
            } else {
                // Not delta-seconds: ignored, so the age is the few seconds the test took.
                #expect(served < 60)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func theFirstMemberOfAnAgeListCounts(_ kind: TransportKind) async throws {
        try await ScriptedServer.with { _ in
            ScriptedServer.response("200 OK", ["Cache-Control: max-age=3600", "Age: 7200, 0"], body: "old")
        } _: { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.useFrozenCache() }
            _ = try await client.data(for: get(server, "/r"))
            _ = try await client.data(for: get(server, "/r"))
            // Two hours old against an hour of freshness: stale, so both went to the server.
            #expect(server.requests.count == 2)
        }
    }

    /// A server whose `GET`s are fresh for ten minutes and numbered, and whose other methods
    /// answer `status` with `fields`.
    private static func numberedGets(otherwise status: String = "200 OK", _ fields: [String] = []) -> ScriptedServer.Script {
        let gets = NIOLockedValueBox(0)
        return { request in
            guard request.method == "GET" else { return ScriptedServer.response(status, fields, body: "done") }
            let number = gets.withLockedValue { count in
                count += 1
                return count
            }
            return ScriptedServer.response("200 OK", ["Cache-Control: max-age=600"], body: "\(request.target) \(number)")
        }
    }

    private func text(_ client: Client, _ server: ScriptedServer, _ path: String, method: HTTPRequest.Method = .get) async throws -> String {
        var request = try get(server, path)
        request.method = method
        return String(decoding: try await client.data(for: request).body, as: UTF8.self)
    }

    @Test(arguments: TransportKind.allCases, ["POST", "PUT", "DELETE", "PATCH", "PURGE"])
    func anUnsafeMethodInvalidatesItsTarget(_ kind: TransportKind, _ method: String) async throws {
        try await ScriptedServer.with(Self.numberedGets()) { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.useFrozenCache() }
            #expect(try await text(client, server, "/r") == "/r 1")
            #expect(try await text(client, server, "/r") == "/r 1")
            _ = try await text(client, server, "/r", method: HTTPRequest.Method(method)!)
            #expect(try await text(client, server, "/r") == "/r 2")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func anUnsafeMethodInvalidatesTheLocationsItNamesOnItsOrigin(_ kind: TransportKind) async throws {
        let fields = ["Location: /created", "Content-Location: http://127.0.0.1:1/elsewhere"]
        try await ScriptedServer.with(Self.numberedGets(otherwise: "201 Created", fields)) { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.useFrozenCache() }
            _ = try await text(client, server, "/created")
            _ = try await text(client, server, "/r", method: .post)
            #expect(try await text(client, server, "/created") == "/created 2")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func anErrorAnswerToAnUnsafeMethodLeavesTheCacheAlone(_ kind: TransportKind) async throws {
        try await ScriptedServer.with(Self.numberedGets(otherwise: "500 Internal Server Error")) { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.useFrozenCache() }
            _ = try await text(client, server, "/r")
            await #expect(throws: TrellisError.self) { try await text(client, server, "/r", method: .post) }
            #expect(try await text(client, server, "/r") == "/r 1")
        }
    }

    /// 40 responses of a 2-byte body and 40 KB of headers each, into a 1 MiB cache: counted by
    /// their bodies alone all 40 were kept; counted whole, the oldest go.
    @Test(arguments: TransportKind.allCases)
    func theMemoryCacheCountsHeadsAsWellAsBodies(_ kind: TransportKind) async throws {
        let padding = String(repeating: "h", count: 40_000)
        try await ScriptedServer.with { request in
            ScriptedServer.response("200 OK", ["Cache-Control: max-age=600", "X-Padding: \(padding)"], body: "ok")
        } _: { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.useFrozenCache(memoryCapacity: 1 << 20) }
            for number in 0..<40 { _ = try await text(client, server, "/r/\(number)") }
            #expect(server.requests.count == 40)
            _ = try await text(client, server, "/r/39")
            #expect(server.requests.count == 40)
            _ = try await text(client, server, "/r/0")
            #expect(server.requests.count == 41)
        }
    }

    // `end - start + 1` overflowed for a range that ends at the largest Int64.
    @Test(arguments: TransportKind.allCases)
    func aContentRangeEndingAtTheLargestIntegerIsRefusedNotATrap(_ kind: TransportKind) async throws {
        try await ScriptedServer.with { _ in
            ScriptedServer.response("206 Partial Content", ["Content-Range: bytes 0-9223372036854775807/*"], body: "0123456789")
        } _: { server in
            let client = Client(baseURL: server.url, transport: kind.transport)
            var request = try get(server, "/file")
            request.headerFields[.range] = "bytes=0-"
            await #expect(throws: TrellisError.self) { try await client.download(for: request) }
        }
    }
}

