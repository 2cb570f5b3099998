import Foundation
import HTTPTypes
import InMemoryTracing
import Logging
import Testing
import Trellis

/// Secrets a server echoes back (the second hostile-servers issue): what comes back is
/// redacted as what goes out is, in spans, errors, logs and the errors' underlying values.
@Suite("Hostile servers: echoed secrets", .hangGuard)
struct EchoedSecretTests {
    private static let key = "s3cret-query-key"

    /// Redirects every request to its own target with `n` counted up, so that the query (and
    /// the key in it) is echoed into `Location` until the client gives up; also echoes the
    /// request's `X-Echo-Key` into the response.
    private static func echoingRedirects(_ request: ScriptedServer.Received) -> String {
        let echoed = request.field("X-Echo-Key").map { ["X-Echo-Key: \($0)"] } ?? []
        return ScriptedServer.response("302 Found", ["Location: \(request.target)&n=\(request.numberOnConnection)"] + echoed)
    }

    @Test(arguments: TransportKind.allCases)
    func aKeyEchoedIntoARedirectIsRedactedInSpansErrorsAndLogs(_ kind: TransportKind) async throws {
        let records = LogCapture()
        var logger = Logger(label: "trellis-test") { _ in records }
        logger.logLevel = .debug
        let tracer = InMemoryTracer()
        try await ScriptedServer.with(Self.echoingRedirects) { server in
            let client = Client(
                baseURL: server.url,
                transport: kind.transport,
                middlewares: [try APIKey(.query("sig"), Self.key), try APIKey(.header("X-Echo-Key"), "s3cret-header-key")]
            ) {
                $0.logger = logger
                $0.observability = .init(tracer: tracer)
                // Seven hops; under ThreadSanitizer, beside the rest of the suite, they have
                // taken more than the default minute over URLSession.
                $0.timeouts.request = .seconds(600)
            }
            let failure = await #expect(throws: TrellisError.self) {
                try await client.perform(Request(method: .get, url: URL(string: server.url.absoluteString + "/start?x=1")!))
            }
            #expect(server.requests.contains { $0.target.contains(Self.key) })
            let error = try #require(failure)
            #expect(!"\(error)".contains(Self.key))
            #expect("\(error)".contains("redirect"))

            let span = try #require(tracer.finishedSpans.first)
            #expect(span.events.map(\.name).contains("redirect followed"))
            let events = span.events.map { "\($0.attributes)" }.joined(separator: "\n")
            #expect(events.contains("url.full"))
            #expect(!events.contains(Self.key))
            #expect(!"\(span.attributes)".contains(Self.key))

            let logs = records.messages.joined(separator: "\n")
            #expect(logs.lowercased().contains("location: "))
            #expect(!logs.contains(Self.key))
            #expect(!logs.contains("s3cret-header-key"))
        }
    }

    /// FoundationNetworking's errors carry the whole URL in their user info; this server
    /// closes every connection without answering.
    @Test func anUnderlyingURLErrorCarriesNoKey() async throws {
        try await ScriptedServer.with { _ in "" } _: { server in
            let url = try #require(URL(string: server.url.absoluteString + "/r"))
            let client = Client(baseURL: url, transport: URLSessionTransport()) { $0.retry = .none }
            var components = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
            components.queryItems = [URLQueryItem(name: "api_key", value: Self.key)]
            let failure = await #expect(throws: TrellisError.self) {
                try await client.perform(Request(method: .get, url: try #require(components.url)))
            }
            var dumped = ""
            dump(failure, to: &dumped)
            #expect(!dumped.contains(Self.key))
            #expect(dumped.contains("api_key=%3Credacted%3E"))
        }
    }
}
