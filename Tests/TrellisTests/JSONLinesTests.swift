import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Testing
import Trellis

/// JSON Lines and JSON text sequences read as values, against servers that stream them: in
/// time, in order, and within limits when the server misbehaves.
@Suite("JSON Lines streams", .serialized, .hangGuard)
struct JSONLinesTests {
    struct Token: Codable, Sendable, Equatable {
        var response: String
        var done: Bool
    }

    /// The routes of a model server and of the faults.
    final class StreamServer: Sendable {
        /// Opened by the test to let `/gated` send its second line.
        let gate: AsyncStream<Void>
        let openGate: AsyncStream<Void>.Continuation
        /// The prompts `/api/generate` received.
        let prompts = NIOLockedValueBox<[String]>([])

        init() {
            (gate, openGate) = AsyncStream.makeStream(of: Void.self)
        }

        func install(_ router: Router<BasicRequestContext>) {
            router.post("api/generate") { request, context in
                let prompt = try await request.decode(as: Prompt.self, context: context)
                self.prompts.withLockedValue { $0.append(prompt.prompt) }
                return Self.stream { writer in
                    for word in ["Hello", " there", "!"] {
                        try await writer.write(ByteBuffer(string: #"{"response":"\#(word)","done":false}"# + "\n"))
                    }
                    try await writer.write(ByteBuffer(string: #"{"response":"","done":true}"#))  // the last line has no newline
                }
            }
            router.get("gated") { _, _ in
                Self.stream { writer in
                    try await writer.write(ByteBuffer(string: "\r\n" + #"{"response":"first","done":false}"# + "\r\n\n"))
                    var gate = self.gate.makeAsyncIterator()
                    await gate.next()
                    // RFC 7464's framing: a record separator before the value.
                    try await writer.write(ByteBuffer(string: "\u{1E}" + #"{"response":"second","done":true}"# + "\n"))
                }
            }
            router.get("malformed") { _, _ in
                Self.stream { writer in
                    try await writer.write(ByteBuffer(string: #"{"response":"fine","done":false}"# + "\n"))
                    try await writer.write(ByteBuffer(string: #"{"response": 42, "done": false}"# + "\n"))
                    try await writer.write(ByteBuffer(string: #"{"response":"after","done":true}"# + "\n"))
                }
            }
            router.get("stall") { _, _ in
                Self.stream { writer in
                    try await writer.write(ByteBuffer(string: #"{"response":"one","done":false}"# + "\n"))
                    var gate = self.gate.makeAsyncIterator()
                    await gate.next()
                }
            }
        }

        private static func stream(_ write: @escaping @Sendable (inout any ResponseBodyWriter) async throws -> Void) -> Hummingbird.Response {
            Hummingbird.Response(status: .ok, headers: [.contentType: "application/x-ndjson"], body: .init { writer in
                try await write(&writer)
                try await writer.finish(nil)
            })
        }
    }

    struct Prompt: Codable, Sendable {
        var model: String
        var prompt: String
    }

    private func request(_ url: URL, _ path: String) throws -> Trellis.Request {
        try Trellis.Request(method: .get, url: url.appending(path: path))
    }

    @Test(arguments: TransportKind.allCases)
    func aServiceMethodStreamsTheAnswerToAPost(_ kind: TransportKind) async throws {
        let server = StreamServer()
        try await TestServer.with(server.install) { url in
            let ollama = OllamaService(client: Client(baseURL: url, transport: kind.transport))
            var tokens: [Token] = []
            for try await token in try await ollama.generate(request: Prompt(model: "llama3", prompt: "Say hello")) {
                tokens.append(token)
            }
            #expect(tokens.map(\.response).joined() == "Hello there!")
            #expect(tokens.last?.done == true)
            #expect(server.prompts.withLockedValue { $0 } == ["Say hello"])
        }
    }

    @Test func eachValueComesAsSoonAsItsLineIsComplete() async throws {
        let server = StreamServer()
        try await TestServer.with(server.install) { url in
            let client = Client(baseURL: url)
            var values = client.jsonLines(for: try request(url, "gated"), as: Token.self).makeAsyncIterator()
            // The server holds its second line until the first value has come: the stream did
            // not wait for the body's end. Blank lines and CRLF are passed over.
            let first = try await values.next()
            #expect(first == Token(response: "first", done: false))
            server.openGate.yield()
            let second = try await values.next()
            #expect(second == Token(response: "second", done: true))
            let end = try await values.next()
            #expect(end == nil)
        }
    }

    @Test func aMalformedLineEndsTheStreamNamingItOrIsSkipped() async throws {
        let server = StreamServer()
        try await TestServer.with(server.install) { url in
            let client = Client(baseURL: url)
            var read: [String] = []
            let error = await #expect(throws: TrellisError.self) {
                for try await token in client.jsonLines(for: try request(url, "malformed"), as: Token.self) { read.append(token.response) }
            }
            #expect(read == ["fine"])
            guard case .decodingFailed(let failure)? = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.line == 2)
            #expect("\(failure)".contains("from line 2"), "\(failure)")
            #expect(failure.bodyExcerpt.contains(#""response": 42"#))

            var skipping: [String] = []
            let lenient = client.jsonLines(for: try request(url, "malformed"), as: Token.self, settings: .init(skipsMalformedLines: true))
            for try await token in lenient { skipping.append(token.response) }
            #expect(skipping == ["fine", "after"])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aLineThatNeverEndsFailsAtTheLimitAndClosesTheConnection(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport)
            // The flood is one line of `x` without end.
            let limited = client.jsonLines(for: try request(server.url, "flood"), as: Token.self, settings: .init(maximumLineLength: 256 * 1024))
            let error = await #expect(throws: TrellisError.self) { for try await _ in limited {} }
            guard case .responseTooLarge(let failure)? = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.limit == 256 * 1024)
            #expect(failure.subject == "a line of the JSON stream")
            // The flood ends only when the client closes the connection.
            var ended = server.floodEnded.makeAsyncIterator()
            #expect(await ended.next() != nil)
        }
    }

    /// A flood of small lines read as values: the server is held back by the connection (it
    /// writes as fast as the client takes bytes), and ending the iteration closes it.
    @Test func aFloodOfLinesIsHeldBackAndBreakingCloses() async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url)
            var count = 0
            for try await token in client.jsonLines(for: try request(server.url, "flood-lines"), as: Token.self) {
                #expect(token.response == "tick")
                count += 1
                if count == 20_000 { break }
            }
            var ended = server.floodEnded.makeAsyncIterator()
            let written = try #require(await ended.next())
            // 20,000 lines are 680 KB; past them, the server got only as far as the socket
            // buffers and the transport's read-ahead let it.
            #expect(written < 32 << 20, "the server wrote \(written) bytes for 20,000 lines read")
        }
    }

    @Test func aStreamSilentForTheIdleTimeoutEnds() async throws {
        let server = StreamServer()
        try await TestServer.with(server.install) { url in
            let client = Client(baseURL: url) { $0.timeouts.idle = .milliseconds(300) }
            var values = client.jsonLines(for: try request(url, "stall"), as: Token.self).makeAsyncIterator()
            let first = try await values.next()
            #expect(first?.response == "one")
            let error = await #expect(throws: TrellisError.self) { _ = try await values.next() }
            guard case .timedOut? = error else { Issue.record("\(String(describing: error))"); return }
            server.openGate.yield()
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aBodyCutMidValueFails(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport)
            let error = await #expect(throws: TrellisError.self) {
                for try await _ in client.jsonLines(for: try request(server.url, "cut-short"), as: Token.self) {}
            }
            guard case .connectionFailed? = error else { Issue.record("\(String(describing: error))"); return }
        }
    }

    @Test func aRefusedRequestIsTheStatusFailure() async throws {
        let server = StreamServer()
        try await TestServer.with(server.install) { url in
            let client = Client(baseURL: url)
            let error = await #expect(throws: TrellisError.self) {
                for try await _ in client.jsonLines(for: try request(url, "nowhere"), as: Token.self) {}
            }
            guard case .unacceptableStatus(let failure)? = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.status == .notFound)
        }
    }
}

@Service
private protocol Ollama {
    @POST("/api/generate")
    @Body("request")
    func generate(request: JSONLinesTests.Prompt) async throws -> JSONLines<JSONLinesTests.Token>
}
