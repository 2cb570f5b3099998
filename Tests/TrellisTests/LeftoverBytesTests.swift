import Foundation
import Testing
import Trellis

/// A server that sends more than its `Content-Length` leaves the excess on a pooled
/// connection (the second hostile-servers issue, hole 12).
@Suite("Hostile servers: bytes past an answer's length", .hangGuard)
struct LeftoverBytesTests {
    /// Two calls at once on a pool of one connection: the second waits for the first and is
    /// given its connection as soon as the first answer ends, before SwiftNIO's parser reaches
    /// the 28 bytes the server sent past it. It failed ("invalid constant string"); it is now
    /// sent again on another connection. Every answer of this server overruns, so a
    /// connection opened for the one sent again may be left the same way before it gets it:
    /// ten rounds check that a few tries are enough.
    @Test func aCallAnsweredWithWhatThePreviousAnswerLeftIsSentAgainOnANewConnection() async throws {
        try await ScriptedServer.with { _ in
            ScriptedServer.response("200 OK", [], body: "0123456789") + "GARBAGE-GARBAGE-GARBAGE-GARB"
        } _: { server in
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 1
            // Not about timeouts: under ThreadSanitizer beside a build, a connection took more than the 10 s default.
            configuration.timeout.connect = .seconds(120)
            let transport = AsyncHTTPClientTransport(configuration: configuration)
            let client = Client(baseURL: server.url, transport: transport)
            for round in 0..<10 {
                let bodies = try await withThrowingTaskGroup(of: String.self) { group in
                    for call in 0..<2 {
                        group.addTask {
                            let url = try #require(URL(string: server.url.absoluteString + "/over?\(round)-\(call)"))
                            return String(decoding: try await client.data(for: Request(method: .get, url: url)).body, as: UTF8.self)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(bodies == ["0123456789", "0123456789"])
            }
            try await transport.shutdown()
        }
    }
}
