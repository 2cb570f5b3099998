import Foundation
import HTTPTypes
import Testing
import Trellis

/// What wheel's README shows, in Trellis's spelling (the migration tables give the mapping).
@Suite("wheel's examples")
struct WheelCompatibilityTests {
    /// wheel: `let commonHeaders = ["Custom-Header": "CustomValue"]`, appended to every request.
    @Test(arguments: TransportKind.allCases)
    func commonHeadersGoOnEveryRequestAndARequestsOwnValueWins(_ kind: TransportKind) async throws {
        try await TestServer.with({ TestRoutes.install($0) }) { url in
            let commonHeaders: HTTPFields = [HTTPField.Name("Custom-Header")!: "CustomValue", .accept: "application/vnd.wheel+json"]
            let client = Client(baseURL: url, transport: kind.transport) { $0.defaultHeaders = commonHeaders }
            let probe = ProbeService(client: client)

            let plain = try await probe.segment(value: "a")
            #expect(plain.header("Custom-Header") == "CustomValue")
            #expect(plain.header("Accept") == "application/vnd.wheel+json")

            // `@Headers(["Accept": "application/json"])` on the endpoint keeps its own value.
            let own = try await probe.headers(trace: nil)
            #expect(own.header("Accept") == "application/json")
            #expect(own.header("Custom-Header") == "CustomValue")

            // On a redirect's next hop too.
            let redirected = try await client.value(for: Request(method: .get, url: url.appending(path: "redirect/302").appending(queryItems: [URLQueryItem(name: "to", value: "/echo/items/b")])), as: Echo.self)
            #expect(redirected.header("Custom-Header") == "CustomValue")
        }
    }
}
