import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import NIOHTTP1
import Testing
@testable import Trellis

/// The AsyncHTTPClient transport reuses the request it made for a recent URL; each call still
/// sends its own header fields.
@Suite("Prepared requests")
struct PreparedRequestsTests {
    @Test
    func callsToTheSameURLEachSendTheirOwnHeaderFields() async throws {
        try await TestServer.with({ router in
            router.get("probe") { request, _ in request.headers[HTTPField.Name("X-Probe")!] ?? "none" }
            router.delete("probe") { request, _ in "deleted " + (request.headers[HTTPField.Name("X-Probe")!] ?? "none") }
        }) { url in
            let transport = AsyncHTTPClientTransport()
            let client = Client(baseURL: url, transport: transport)
            for value in ["first", "second", "third"] {
                var request = try Trellis.Request(method: .get, url: url.appending(path: "probe"))
                request.headerFields[HTTPField.Name("X-Probe")!] = value
                #expect(try await client.value(for: request, as: String.self) == value)
            }
            let plain = try Trellis.Request(method: .get, url: url.appending(path: "probe"))
            #expect(try await client.value(for: plain, as: String.self) == "none")
            var delete = try Trellis.Request(method: .delete, url: url.appending(path: "probe"))
            delete.headerFields[HTTPField.Name("X-Probe")!] = "fourth"
            #expect(try await client.value(for: delete, as: String.self) == "deleted fourth")
            // One request kept per method and URL.
            #expect(transport.preparedRequests.count == 2)
            try await transport.shutdown()
        }
    }

    @Test
    func theCacheStaysWithinItsCapacity() throws {
        let requests = PreparedRequests()
        for index in 0..<(PreparedRequests.capacity * 3) {
            _ = try requests.request(for: get("http://127.0.0.1:1/items/\(index)"), headers: [:])
        }
        #expect(requests.count == PreparedRequests.capacity)
    }

    @Test
    func aURLAsyncHTTPClientRefusesFailsAndIsNotKept() throws {
        let requests = PreparedRequests()
        #expect(throws: HTTPClientError.self) {
            try requests.request(for: Trellis.Request(head: HTTPRequest(method: .get, scheme: "ftp", authority: "127.0.0.1", path: "/file")), headers: [:])
        }
        #expect(requests.count == 0)
    }

    @Test
    func aKeptRequestCarriesOnlyTheHeaderFieldsOfItsCall() throws {
        let requests = PreparedRequests()
        let kept = try requests.request(for: get("http://127.0.0.1:1/a"), headers: ["X-Probe": "1"])
        let again = try requests.request(for: get("http://127.0.0.1:1/a"), headers: ["X-Other": "2"])
        #expect(kept.headers["X-Probe"] == ["1"])
        #expect(again.headers["X-Probe"].isEmpty && again.headers["X-Other"] == ["2"])
        #expect(requests.count == 1)
    }

    private func get(_ url: String) throws -> Trellis.Request {
        try Trellis.Request(method: .get, url: #require(URL(string: url)))
    }
}
