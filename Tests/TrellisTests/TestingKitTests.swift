import AsyncHTTPClient
import CompressNIO
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Testing
import Trellis
import TrellisTesting

/// The secrets a recorded client carries; none may appear in a HAR file.
private enum Secrets {
    static let password = "basic-password-31415"
    static let apiKeyHeader = "header-key-92653"
    static let apiKeyQuery = "query-key-58979"
    static let customHeader = "tenant-secret-32384"
    static let cookie = "cookie-secret-62643"
    static let formPassword = "form-password-38327"
    static let all = [password, apiKeyHeader, apiKeyQuery, customHeader, cookie, formPassword]

    static func middlewares() throws -> [any Middleware] {
        [
            BasicAuthentication(username: "reader", password: password),
            try APIKey(.header("X-API-Key"), apiKeyHeader),
            try APIKey(.query("api_key"), apiKeyQuery),
            try APIKey(.header("X-Tenant"), customHeader),
        ]
    }
}

/// What a run of the recorded calls returned, to compare a replay with.
private struct Outcome: Equatable {
    var posts: [Post]
    var post: Post
    var created: Post
    var text: String
    var bytes: Data
    var echoedPath: String
    var formBody: String

    /// The outcome as a replay gives it: the echo server sent the form's password back, and
    /// the recording keeps it out of the answer too.
    var withEchoedSecretsRedacted: Outcome {
        var outcome = self
        outcome.formBody = formBody.replacingOccurrences(of: Secrets.formPassword, with: "<redacted>")
        #expect(outcome.formBody != formBody)
        return outcome
    }
}

/// The same service calls, recorded and replayed: each leaves a secret for the recording to
/// keep out.
private func makeCalls(_ client: Client) async throws -> Outcome {
    let blog = BlogService(client: client)
    let probe = ProbeService(client: client)
    let login = Login(user: "reader", password: Secrets.formPassword, remember: true, scopes: ["read"])
    return Outcome(
        posts: try await blog.posts(),
        post: try await blog.post(id: 7),
        created: try await blog.create(post: NewPost(title: "Recorded")),
        text: try await probe.text(),
        bytes: try await probe.bytes(),
        echoedPath: try await probe.segment(value: "a b").path,
        formBody: try await probe.form(login: login).body
    )
}

private func recordingClient(_ baseURL: URL, _ transport: any Transport) throws -> Client {
    Client(baseURL: baseURL, transport: transport, middlewares: try Secrets.middlewares()) {
        $0.defaultHeaders[.cookie] = "session=\(Secrets.cookie)"
    }
}

private func temporaryFile(_ name: String) -> URL {
    FileManager.default.temporaryDirectory.appending(path: "trellis-\(UUID().uuidString)-\(name).har")
}

@Suite("Testing kit: HAR recording and replay, fault injection", .hangGuard)
struct TestingKitTests {
    /// A manual clock wakes its sleepers in order as it passes their times, a sleep of no
    /// time returns at once, and a cancelled sleeper throws without the clock moving.
    @Test("A manual clock wakes sleepers as it passes their times, and lets cancelled ones go")
    func aManualClockWakesSleepersInOrderAndLetsCancelledOnesGo() async throws {
        let clock = ManualClock()
        try await clock.sleep(for: .zero)
        let woken = NIOLockedValueBox<[Int]>([])
        let sleepers = (1...3).map { seconds in
            Task {
                try await clock.sleep(for: .seconds(seconds))
                woken.withLockedValue { $0.append(seconds) }
            }
        }
        await clock.sleepers(reaching: 3)
        clock.advance(by: .seconds(2))
        _ = try await sleepers[0].value
        _ = try await sleepers[1].value
        #expect(woken.withLockedValue { $0 }.sorted() == [1, 2])
        sleepers[2].cancel()
        await #expect(throws: CancellationError.self) { try await sleepers[2].value }
        #expect(clock.elapsed == .seconds(2))
        #expect(clock.sleeps.sorted() == [.zero, .seconds(1), .seconds(2), .seconds(3)])
    }

    /// The example of "Testing your code", "Move time by hand": a breaker driven through its
    /// cool-down by a `ManualClock`, over a `MockTransport`.
    @Test("A manual clock drives a breaker through its cool-down, as the guide shows")
    func aManualClockDrivesABreakerThroughItsCoolDown() async throws {
        let mock = MockTransport()
        let healthy = NIOLockedValueBox(false)
        mock.register(.get, "/report") { _ in
            Trellis.Response(head: HTTPResponse(status: healthy.withLockedValue { $0 } ? .ok : .internalServerError), body: Data())
        }
        let clock = ManualClock()
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: mock) {
            $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(3), coolDown: .seconds(30))
            $0.clock = clock
        }
        let report = try Trellis.Request(method: .get, url: URL(string: "https://api.test/report")!)
        for _ in 0..<3 { _ = try? await client.data(for: report) }
        await #expect(throws: TrellisError.self) { try await client.data(for: report) }
        #expect(mock.requests.count == 3)
        clock.advance(by: .seconds(29))
        await #expect(throws: TrellisError.self) { try await client.data(for: report) }
        #expect(mock.requests.count == 3)
        clock.advance(by: .seconds(1))
        healthy.withLockedValue { $0 = true }
        _ = try await client.data(for: report)
        _ = try await client.data(for: report)
        #expect(mock.requests.count == 5)
    }

    @Test("Record service calls over a real server, replay them with no server", arguments: TransportKind.allCases)
    func recordThenReplayOffline(kind: TransportKind) async throws {
        let file = temporaryFile("service")
        defer { try? FileManager.default.removeItem(at: file) }
        let (recorded, baseURL) = try await TestServer.with(TestRoutes.install) { url in
            let recording = RecordingTransport(wrapping: kind.transport)
            let outcome = try await makeCalls(try recordingClient(url, recording))
            try recording.write(to: file)
            return (outcome, url)
        }
        // The server is gone: only the recording can answer.
        let replay = try ReplayTransport(contentsOf: file)
        let replayed = try await makeCalls(try recordingClient(baseURL, replay))
        #expect(replayed == recorded.withEchoedSecretsRedacted)
        #expect(replay.unusedEntryCount == 0)

        let text = try String(contentsOf: file, encoding: .utf8)
        for secret in Secrets.all {
            #expect(!text.contains(secret), "the HAR file holds the secret \(secret)")
        }
        try HARStructure.validate(Data(contentsOf: file), entries: 7)
        #expect(try fileMode(file) == 0o600)
        let archive = try HTTPArchive(contentsOf: file)
        #expect(archive.log.entries.map(\.request.method) == ["GET", "GET", "POST", "GET", "GET", "GET", "POST"])
        let binary = try #require(archive.log.entries.first { $0.request.url.hasSuffix("/bytes") || $0.request.url.contains("/bytes?") })
        #expect(binary.response.content.encoding == "base64")
        #expect(binary.response.content.bytes == TestRoutes.bytes)
        #expect(archive.log.entries[1].response.content.encoding == nil)
        #expect(archive.log.entries[1].request.headers.contains { $0.name.lowercased() == "authorization" && $0.value == "<redacted>" })
    }

    @Test("Record against a TLS server, replay offline")
    func recordOverTLS() async throws {
        let certificates = try TestCertificates()
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([certificates.authority])
        configuration.tlsConfiguration = tls
        let transport = AsyncHTTPClientTransport(configuration: configuration)
        let (recorded, baseURL, archive) = try await TLSTestServer.with(certificates, TestRoutes.install) { url in
            let recording = RecordingTransport(wrapping: transport)
            let outcome = try await makeCalls(try recordingClient(url, recording))
            // Closed before the server stops, which otherwise waits for its connections.
            try await transport.shutdown()
            return (outcome, url, recording.archive)
        }
        #expect(baseURL.scheme == "https")
        #expect(archive.log.entries.allSatisfy { $0.request.url.hasPrefix("https://localhost:") })
        let replayed = try await makeCalls(try recordingClient(baseURL, ReplayTransport(archive: archive)))
        #expect(replayed == recorded.withEchoedSecretsRedacted)
        let text = String(decoding: try archive.encoded(), as: UTF8.self)
        for secret in Secrets.all { #expect(!text.contains(secret)) }
    }

    @Test("Strict replay names the closest recording and how it differs")
    func strictReplayNamesTheDifference() async throws {
        let archive = try await TestServer.with(TestRoutes.install) { url in
            let recording = RecordingTransport(wrapping: AsyncHTTPClientTransport.shared)
            let blog = BlogService(client: Client(baseURL: url, transport: recording))
            _ = try await blog.post(id: 7)
            _ = try await blog.create(post: NewPost(title: "First"))
            return (recording.archive, url)
        }
        let blog = BlogService(client: Client(baseURL: archive.1, transport: ReplayTransport(archive: archive.0)))

        let wrongPath = await #expect(throws: ReplayMismatch.self) { try await blog.post(id: 8) }
        #expect(wrongPath?.closest?.index == 0)
        #expect(wrongPath?.closest?.differences == ["the path: recorded /posts/7, sent /posts/8"])
        #expect(wrongPath.map { "\($0)" }?.contains("no recorded exchange matches GET \(archive.1.absoluteString)/posts/8") == true)

        let wrongBody = await #expect(throws: ReplayMismatch.self) { try await blog.create(post: NewPost(title: "Second")) }
        #expect(wrongBody?.closest?.index == 1)
        #expect(wrongBody?.closest?.differences == [#"the body: recorded "{"title":"First"}", sent "{"title":"Second"}""#])

        let lenient = BlogService(client: Client(baseURL: archive.1, transport: ReplayTransport(archive: archive.0, mode: .notFound)))
        let missing = await #expect(throws: TrellisError.self) { try await lenient.post(id: 8) }
        guard case .unacceptableStatus(let failure) = missing else {
            Issue.record("expected a 404, got \(String(describing: missing))")
            return
        }
        #expect(failure.status == .notFound)
    }

    @Test("Matching rules: query order, ignored parameters, JSON bodies, header fields, occurrences in order")
    func matchingRules() async throws {
        let base = "https://api.test"
        func entry(_ method: String, _ path: String, body: String? = nil, headers: [HTTPArchive.NameValue] = [], answer: String) -> HTTPArchive.Entry {
            let url = base + path
            var request = HTTPArchive.Request(
                try! Trellis.Request(method: HTTPRequest.Method(method)!, url: URL(string: url)!),
                body: body.map { Data($0.utf8) },
                redaction: .init()
            )
            request.headers = headers
            if let body { request.postData = HTTPArchive.PostData(mimeType: "application/json", text: body) }
            return HTTPArchive.Entry(
                startedDateTime: "2026-11-27T07:00:00.000Z",
                time: 1,
                request: request,
                response: HTTPArchive.Response(
                    status: 200, statusText: "OK", httpVersion: "HTTP/1.1", cookies: [],
                    headers: [HTTPArchive.NameValue(name: "Content-Type", value: "text/plain")],
                    content: HTTPArchive.Content(size: answer.utf8.count, mimeType: "text/plain", text: answer),
                    redirectURL: "", headersSize: -1, bodySize: answer.utf8.count
                ),
                timings: HTTPArchive.Timings(send: 0, wait: 1, receive: 0)
            )
        }
        let archive = HTTPArchive(entries: [
            entry("GET", "/search?q=swift&page=2&t=111", answer: "search"),
            entry("POST", "/items", body: #"{"a": 1, "b": [true, null]}"#, answer: "created"),
            entry("GET", "/poll", answer: "first"),
            entry("GET", "/poll", answer: "second"),
            entry("GET", "/tenant", headers: [HTTPArchive.NameValue(name: "Accept", value: "text/plain")], answer: "plain"),
        ])
        let url = URL(string: base)!
        func text(_ client: Client, _ method: HTTPRequest.Method, _ path: String, body: String? = nil, accept: String? = nil) async throws -> String {
            var request = try Trellis.Request(method: method, url: URL(string: base + path)!)
            if let body { request.body = Trellis.RequestBody(body, contentType: "application/json") }
            if let accept { request.headerFields[.accept] = accept }
            return try await client.value(for: request, as: String.self)
        }

        let strict = Client(baseURL: url, transport: ReplayTransport(archive: archive))
        // The query's order does not matter, its values do.
        await #expect(throws: ReplayMismatch.self) { try await text(strict, .get, "/search?page=2&q=swift&t=222") }
        #expect(try await text(strict, .get, "/search?page=2&t=111&q=swift") == "search")
        // The body byte for byte, unless matched as JSON.
        await #expect(throws: ReplayMismatch.self) { try await text(strict, .post, "/items", body: #"{"b":[true,null],"a":1}"#) }
        // The n-th request gets the n-th recording, and the last one again after that.
        #expect(try await text(strict, .get, "/poll") == "first")
        #expect(try await text(strict, .get, "/poll") == "second")
        #expect(try await text(strict, .get, "/poll") == "second")
        // No header field counts by default.
        #expect(try await text(strict, .get, "/tenant", accept: "application/json") == "plain")

        var rules = ReplayTransport.Matching(headers: .all(except: []), body: .json, ignoredQueryNames: ["t"])
        let relaxed = Client(baseURL: url, transport: ReplayTransport(archive: archive, matching: rules))
        #expect(try await text(relaxed, .get, "/search?page=2&q=swift&t=222") == "search")
        #expect(try await text(relaxed, .post, "/items", body: #"{"b":[true,null],"a":1}"#) == "created")
        let header = await #expect(throws: ReplayMismatch.self) { try await text(relaxed, .get, "/tenant", accept: "application/json") }
        #expect(header?.closest?.differences == ["the header field Accept: recorded text/plain, sent application/json"])
        rules.headers = .all(except: [.accept])
        let ignoring = Client(baseURL: url, transport: ReplayTransport(archive: archive, matching: rules))
        #expect(try await text(ignoring, .get, "/tenant", accept: "application/json") == "plain")
    }

    @Test("Recording what is missing: the unmatched request goes to the server, the rest replays")
    func recordMissing() async throws {
        let file = temporaryFile("missing")
        defer { try? FileManager.default.removeItem(at: file) }
        try await TestServer.with(TestRoutes.install) { url in
            let recording = RecordingTransport(wrapping: AsyncHTTPClientTransport.shared)
            _ = try await BlogService(client: Client(baseURL: url, transport: recording)).post(id: 7)

            let replay = ReplayTransport(archive: recording.archive, mode: .recordingMissing(over: AsyncHTTPClientTransport.shared))
            let blog = BlogService(client: Client(baseURL: url, transport: replay))
            #expect(try await blog.post(id: 7) == Post(id: 7, title: "Post 7"))
            #expect(try await blog.post(id: 8) == Post(id: 8, title: "Post 8"))
            try replay.write(to: file)
        }
        let completed = try HTTPArchive(contentsOf: file)
        #expect(completed.log.entries.map { URL(string: $0.request.url)?.path } == ["/posts/7", "/posts/8"])
        // Now the whole conversation replays with no server.
        let replay = ReplayTransport(archive: completed)
        let blog = BlogService(client: Client(baseURL: URL(string: completed.log.entries[0].request.url)!.deletingLastPathComponent().deletingLastPathComponent(), transport: replay))
        #expect(try await blog.post(id: 8) == Post(id: 8, title: "Post 8"))
    }

    @Test("An event stream is recorded part by part and replays as events", arguments: [ReplayTransport.Pacing.immediate, .recorded(speed: 1000)])
    func eventStreamReplay(pacing: ReplayTransport.Pacing) async throws {
        let ticks = SignalledTicks()
        let (archive, url) = try await TestServer.with(ticks.install) { url in
            let recording = RecordingTransport(wrapping: AsyncHTTPClientTransport.shared)
            let client = Client(baseURL: url, transport: recording)
            var received: [String] = []
            for try await event in client.events(for: try Trellis.Request(method: .get, url: url.appending(path: "ticks")), reconnects: false) {
                received.append(event.data)
                ticks.next()
            }
            #expect(received == ["tick 1", "tick 2", "tick 3"])
            return (recording.archive, url)
        }
        let content = try #require(archive.log.entries.first?.response.content)
        #expect(content.chunks?.count == 3)
        #expect(content.mimeType == "text/event-stream")

        let client = Client(baseURL: url, transport: ReplayTransport(archive: archive, pacing: pacing))
        var replayed: [String] = []
        for try await event in client.events(for: try Trellis.Request(method: .get, url: url.appending(path: "ticks")), reconnects: false) {
            replayed.append(event.data)
        }
        #expect(replayed == ["tick 1", "tick 2", "tick 3"])
    }

    @Test("A streamed body past the recording limit is cut, with a note")
    func streamedBodyIsCut() async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let recording = RecordingTransport(wrapping: AsyncHTTPClientTransport.shared, recorder: HTTPArchiveRecorder(maximumBodySize: 1000))
            let client = Client(baseURL: url, transport: recording)
            let response = try await client.send(try Trellis.Request(method: .get, url: url.appending(path: "chunked/5000")))
            var total = 0
            for try await chunk in response.body { total += chunk.readableBytes }
            #expect(total == 5000)
            let entry = try #require(recording.archive.log.entries.first)
            #expect(entry.response.content.size == 5000)
            #expect(entry.response.content.bytes?.count == 1000)
            #expect(entry.response.content.comment == "cut at 1000 of 5000 bytes")
        }
    }

    @Test("Recording a hostile server: a flood is kept to the limit, a stall and a cut end their entries")
    func recordingAHostileServer() async throws {
        try await HostileServer.with { server in
            let recorder = HTTPArchiveRecorder(maximumBodySize: 64 << 10)
            let recording = RecordingTransport(wrapping: AsyncHTTPClientTransport.shared, recorder: recorder)
            // The stall is told by an idle timeout of 300 ms; the flood and the cut are read with
            // a patient one, so that a reader the machine holds back for a moment is not a stall.
            let patient = Client(baseURL: server.url, transport: recording) {
                $0.timeouts = .patient
                $0.retry = RetryPolicy.none
            }
            let client = Client(baseURL: server.url, transport: recording) {
                $0.timeouts = Client.Configuration.Timeouts(request: .seconds(60), idle: .milliseconds(300))
                $0.retry = RetryPolicy.none
            }
            // A body that never ends, read for 4 MiB and then dropped.
            do {
                let flood = try await patient.send(try Trellis.Request(method: .get, url: server.url.appending(path: "flood")))
                var read = 0
                for try await chunk in flood.body {
                    read += chunk.readableBytes
                    if read >= 4 << 20 { break }
                }
            }
            // An event stream that stalls after its first event.
            var events: [String] = []
            let stalled = await #expect(throws: TrellisError.self) {
                for try await event in client.events(for: try Trellis.Request(method: .get, url: server.url.appending(path: "stall-events")), reconnects: false) {
                    events.append(event.data)
                }
            }
            #expect(events == ["one"])
            guard case .timedOut = stalled else {
                Issue.record("expected timedOut, got \(String(describing: stalled))")
                return
            }
            // A body cut short by a closed connection.
            await #expect(throws: TrellisError.self) {
                try await patient.perform(try Trellis.Request(method: .get, url: server.url.appending(path: "cut-short")))
            }

            let entries = recorder.archive.log.entries
            try #require(entries.count == 3)
            let flood = entries[0].response
            #expect(flood.content.bytes?.count == 64 << 10)
            #expect(flood.content.size >= 4 << 20)
            #expect(flood.content.comment == "cut at 65536 of \(flood.content.size) bytes")
            #expect(entries[0].comment == "the body was not read to its end")
            #expect(entries[1].response.status == 200)
            #expect(entries[1].response.content.text == "data: one\n\n")
            #expect(entries[1].comment?.contains("failed: ") == true)
            #expect(entries[1].comment?.contains("timed out") == true)
            #expect(entries[2].response.status == 0)
            #expect(entries[2].comment?.hasPrefix("failed: ") == true)
            try HARStructure.validate(try recorder.archive.encoded(), entries: 3)
        }
    }

    @Test("Body fields of your own are redacted in any case, at any depth, in what is sent and what comes back")
    func bodyFieldsOfYourOwn() async throws {
        let mock = MockTransport()
        mock.register(.post, "/session", headerFields: [.contentType: "application/json"], text: #"{"access_token": "token-271828", "user": {"Pin": "pin-314159", "name": "ada"}}"#)
        var redaction = HTTPArchive.Redaction()
        redaction.bodyFieldNames.insert("PIN")
        let recording = RecordingTransport(wrapping: mock, recorder: HTTPArchiveRecorder(redaction: redaction))
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: recording)
        var request = try Trellis.Request(method: .post, url: URL(string: "https://api.test/session")!)
        request.body = Trellis.RequestBody(#"{"login": {"pin": "pin-314159"}, "password": "password-161803"}"#, contentType: "application/json")
        _ = try await client.data(for: request)

        let text = String(decoding: try recording.archive.encoded(), as: UTF8.self)
        for secret in ["token-271828", "pin-314159", "password-161803"] {
            #expect(!text.contains(secret), "the recording holds \(secret)")
        }
        let entry = try #require(recording.archive.log.entries.first)
        #expect(entry.request.postData?.text == #"{"login":{"pin":"<redacted>"},"password":"<redacted>"}"#)
        #expect(entry.response.content.text?.contains(#""name":"ada""#) == true)
    }

    @Test("A file that is not HAR is refused with the field that is wrong")
    func malformedArchive() throws {
        let file = temporaryFile("malformed")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(#"{"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}, "entries": [{"time": 1}]}}"#.utf8).write(to: file)
        let error = #expect(throws: DecodingError.self) { try ReplayTransport(contentsOf: file) }
        #expect("\(String(describing: error))".contains("startedDateTime"))
    }

    /// Owner read and write alone, even under a umask that lets others read (022).
    private func fileMode(_ file: URL) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int) & 0o777
    }

    @Test("A body marked base64 that is not base64 fails, naming its entry, instead of replaying as empty")
    func base64ThatIsNotBase64Fails() async throws {
        let archive = HTTPArchive(entries: [
            HTTPArchive.Entry(
                startedDateTime: "2026-11-27T07:00:00.000Z",
                time: 1,
                request: HTTPArchive.Request(method: "GET", url: "https://api.test/picture"),
                response: HTTPArchive.Response(
                    status: 200,
                    statusText: "OK",
                    headers: [],
                    content: HTTPArchive.Content(size: 4, mimeType: "image/png", text: "not base64!", encoding: "base64")
                ),
                timings: HTTPArchive.Timings(send: 0, wait: 1, receive: 0)
            ),
        ])
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: ReplayTransport(archive: archive)) {
            $0.retry = RetryPolicy.none
        }
        let error = await #expect(throws: TrellisError.self) {
            try await client.data(for: try Trellis.Request(method: .get, url: URL(string: "https://api.test/picture")!))
        }
        #expect("\(String(describing: error))".contains("GET https://api.test/picture"))
        #expect("\(String(describing: error))".contains("not base64"))
    }

    @Test("A HAR file nested 200,000 levels deep is refused at once, naming the bound")
    func deeplyNestedArchiveIsRefused() throws {
        let file = temporaryFile("deep")
        defer { try? FileManager.default.removeItem(at: file) }
        let depth = 200_000
        var json = Data(#"{"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}, "entries": [], "_x": "#.utf8)
        json.append(Data(repeating: UInt8(ascii: "["), count: depth))
        json.append(Data(repeating: UInt8(ascii: "]"), count: depth))
        json.append(Data("}}".utf8))
        try json.write(to: file)
        let error = #expect(throws: DecodingError.self) { try ReplayTransport(contentsOf: file) }
        #expect("\(String(describing: error))".contains("over the 64 HAR needs"))
        // Brackets inside strings are a body's text, not nesting.
        let bracketsInText = #"{"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}, "entries": [], "comment": "\" \#(String(repeating: "[", count: 1000))"}}"#
        try Data(bracketsInText.utf8).write(to: file)
        #expect(try HTTPArchive(contentsOf: file).log.entries.isEmpty)
    }

    @Test("An odd recording replays without a crash: a failed exchange fails again, a status out of range is refused, chunk sizes past the body are cut")
    func oddRecordingsReplaySafely() async throws {
        func entry(_ path: String, status: Int, chunks: [HTTPArchive.Chunk]? = nil, comment: String? = nil) -> HTTPArchive.Entry {
            HTTPArchive.Entry(
                startedDateTime: "2026-11-27T07:00:00.000Z",
                time: 1,
                request: HTTPArchive.Request(method: "GET", url: "https://api.test" + path),
                response: HTTPArchive.Response(
                    status: status,
                    statusText: "",
                    headers: [HTTPArchive.NameValue(name: "Content-Length", value: "99999"), HTTPArchive.NameValue(name: "Bad Name", value: "x")],
                    content: HTTPArchive.Content(size: 10, mimeType: "text/plain", text: "0123456789", chunks: chunks)
                ),
                timings: HTTPArchive.Timings(send: 0, wait: -5, receive: .infinity),
                comment: comment
            )
        }
        let archive = HTTPArchive(entries: [
            entry("/failed", status: 0, comment: "failed: timed out"),
            entry("/odd-status", status: 5000),
            entry("/chunks", status: 200, chunks: [
                HTTPArchive.Chunk(time: -3, size: -7), HTTPArchive.Chunk(time: .nan, size: 4), HTTPArchive.Chunk(time: 1, size: .max),
            ]),
        ])
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: ReplayTransport(archive: archive, pacing: .recorded(speed: 1000))) {
            $0.retry = RetryPolicy.none
        }
        let failed = await #expect(throws: TrellisError.self) { try await client.perform(try Trellis.Request(method: .get, url: URL(string: "https://api.test/failed")!)) }
        #expect("\(String(describing: failed))".contains("the recorded exchange failed: failed: timed out"))
        let odd = await #expect(throws: TrellisError.self) { try await client.perform(try Trellis.Request(method: .get, url: URL(string: "https://api.test/odd-status")!)) }
        #expect("\(String(describing: odd))".contains("5000 is not an HTTP status"))
        let response = try await client.send(try Trellis.Request(method: .get, url: URL(string: "https://api.test/chunks")!))
        var parts: [String] = []
        for try await chunk in response.body { parts.append(String(buffer: chunk)) }
        #expect(parts == ["", "0123", "456789"])
        #expect(response.headerFields[.contentLength] == "10")
    }

    @Test("A live client writes its session as HAR through one event monitor", arguments: TransportKind.allCases)
    func monitorWritesTheSession(kind: TransportKind) async throws {
        let file = temporaryFile("session")
        defer { try? FileManager.default.removeItem(at: file) }
        let monitor = HTTPArchiveMonitor(writingTo: file)
        let faulty = FaultInjectingTransport(wrapping: kind.transport, plan: .script([.status(.serviceUnavailable, retryAfter: 0)]))
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: faulty, middlewares: try Secrets.middlewares()) {
                $0.observability.eventMonitors.append(monitor)
                $0.retry = .standard
            }
            _ = try await makeCalls(client)
        }
        try monitor.write()
        #expect(try fileMode(file) == 0o600)
        let data = try Data(contentsOf: file)
        // Seven calls, the first retried once after its 503.
        try HARStructure.validate(data, entries: 8)
        let archive = try HTTPArchive(contentsOf: file)
        #expect(archive.log.entries.map(\.response.status) == [503, 200, 200, 201, 200, 200, 200, 200])
        let text = String(decoding: data, as: UTF8.self)
        for secret in Secrets.all { #expect(!text.contains(secret), "the HAR file holds the secret \(secret)") }
    }

    @Test("Faults reach a retrying client as the network's would", arguments: TransportKind.allCases)
    func scriptedFaults(kind: TransportKind) async throws {
        let counter = RequestCounter()
        try await TestServer.with({ counter.install($0) }) { url in
            let noWait = RetryPolicy(maximumRetries: 3)
            func client(_ plan: FaultInjectingTransport.Plan, timeouts: Client.Configuration.Timeouts? = nil, retry: RetryPolicy? = nil) -> (Client, FaultInjectingTransport) {
                let faulty = FaultInjectingTransport(wrapping: kind.transport, plan: plan)
                return (Client(baseURL: url, transport: faulty) {
                    $0.retryWithoutWaiting(retry ?? noWait)
                    if let timeouts { $0.timeouts = timeouts }
                }, faulty)
            }
            let get = try Trellis.Request(method: .get, url: url.appending(path: "count"))
            let post = try Trellis.Request(method: .post, url: url.appending(path: "count"))

            // A 503 is answered in the server's place; a drop happens after the server had the
            // request; the third attempt gets through.
            counter.reset()
            let (retrying, faults) = client(.script([.status(.serviceUnavailable, retryAfter: 1), .dropBeforeResponse, nil]))
            #expect(try await retrying.value(for: get, as: String.self) == "2")
            #expect(counter.count == 2)
            #expect(faults.injected.map(\.fault) == [.status(.serviceUnavailable, retryAfter: 1), .dropBeforeResponse])

            // A POST whose connection drops is not sent again.
            counter.reset()
            let (once, _) = client(.script([.dropBeforeResponse]))
            let dropped = await #expect(throws: TrellisError.self) { try await once.value(for: post, as: String.self) }
            guard case .connectionFailed(let failure) = dropped else {
                Issue.record("expected connectionFailed, got \(String(describing: dropped))")
                return
            }
            #expect(failure.reason.contains("dropped before the response"))
            #expect(counter.count == 1)

            // A drop partway through a buffered body is retried for a GET.
            counter.reset()
            let (midway, _) = client(.script([.dropDuringResponse(afterBytes: 1)]))
            #expect(try await midway.value(for: get, as: String.self) == "2")

            // A body that stalls runs into the deadline of a buffered call…
            let short = Client.Configuration.Timeouts(request: .milliseconds(300), idle: .milliseconds(300))
            let (stalled, _) = client(.script([.stallBody(afterBytes: 0)]), timeouts: short, retry: RetryPolicy.none)
            let stall = await #expect(throws: TrellisError.self) { try await stalled.value(for: get, as: String.self) }
            guard case .timedOut = stall else {
                Issue.record("expected timedOut, got \(String(describing: stall))")
                return
            }
            // …and into the idle timeout of a streamed one.
            let idleOnly = Client.Configuration.Timeouts(request: .seconds(60), idle: .milliseconds(300))
            let (idle, _) = client(.script([.stallBody(afterBytes: 0)]), timeouts: idleOnly, retry: RetryPolicy.none)
            let streamed = try await idle.send(get)
            let idleError = await #expect(throws: TrellisError.self) { for try await _ in streamed.body {} }
            guard case .timedOut = idleError else {
                Issue.record("expected timedOut, got \(String(describing: idleError))")
                return
            }
            // Latency past the deadline times the attempt out.
            let (slow, _) = client(.script([.latency(.seconds(30))]), timeouts: short, retry: RetryPolicy.none)
            await #expect(throws: TrellisError.self) { try await slow.value(for: get, as: String.self) }
        }
    }

    @Test("A corrupt compressed body fails where it is decoded", arguments: TransportKind.allCases)
    func corruptCompressedBody(kind: TransportKind) async throws {
        try await TestServer.with(GzipRoute.install) { url in
            let faulty = FaultInjectingTransport(wrapping: kind.transport, plan: .script([.corruptCompressedBody]))
            let client = Client(baseURL: url, transport: faulty) { $0.retry = RetryPolicy.none }
            let request = try Trellis.Request(method: .get, url: url.appending(path: "gzip"))
            let error = await #expect(throws: TrellisError.self) { try await client.value(for: request, as: String.self) }
            guard case .connectionFailed(let failure) = error else {
                Issue.record("expected connectionFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.reason.contains("compressed body"))
            // The next answer is whole again.
            #expect(try await client.value(for: request, as: String.self) == GzipRoute.text)
        }
    }

    @Test("The same seed gives the same faults and the same outcomes", arguments: TransportKind.allCases)
    func seededFaultsRepeat(kind: TransportKind) async throws {
        let chances = [
            FaultInjectingTransport.Chance(.status(.serviceUnavailable, retryAfter: 0), probability: 0.2),
            FaultInjectingTransport.Chance(.dropBeforeResponse, probability: 0.15),
            FaultInjectingTransport.Chance(.dropDuringResponse(afterBytes: 1), probability: 0.15),
        ]
        func run(seed: UInt64, against url: URL) async throws -> (faults: [String], outcomes: [String]) {
            let faulty = FaultInjectingTransport(wrapping: kind.transport, plan: .seeded(seed, chances))
            let client = Client(baseURL: url, transport: faulty) { $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 1)) }
            var outcomes: [String] = []
            for index in 0..<20 {
                let request = try Trellis.Request(method: .get, url: url.appending(path: "count").appending(queryItems: [URLQueryItem(name: "n", value: String(index % 4))]))
                do {
                    _ = try await client.value(for: request, as: String.self)
                    outcomes.append("ok")
                } catch let error as TrellisError {
                    outcomes.append(CallSummaryName.of(error))
                }
            }
            // Without the origin, which is a new port for each server.
            let faults = faulty.injected.map { "\($0.request.replacingOccurrences(of: url.absoluteString, with: "")): \($0.fault)" }
            return (faults, outcomes)
        }
        let (first, again, other) = try await TestServer.with({ RequestCounter().install($0) }) { url in
            (try await run(seed: 42, against: url), try await run(seed: 42, against: url), try await run(seed: 7, against: url))
        }
        // Another server, on another port, as the next run of a test suite would have.
        let elsewhere = try await TestServer.with({ RequestCounter().install($0) }) { url in try await run(seed: 42, against: url) }
        #expect(!first.faults.isEmpty)
        #expect(first.faults == again.faults)
        #expect(first.outcomes == again.outcomes)
        #expect(first.faults == elsewhere.faults)
        #expect(first.outcomes == elsewhere.outcomes)
        #expect(first.outcomes.contains { $0 != "ok" })
        #expect(other.faults != first.faults)
    }
}

/// The case of a ``TrellisError``, for comparing outcomes.
private enum CallSummaryName {
    static func of(_ error: TrellisError) -> String {
        Mirror(reflecting: error).children.first?.label ?? "\(error)"
    }
}

/// A route that counts the requests it answers, and answers with the count.
private final class RequestCounter: Sendable {
    private let value = NIOLockedValueBox(0)
    var count: Int { value.withLockedValue { $0 } }
    func reset() { value.withLockedValue { $0 = 0 } }

    func install(_ router: Router<BasicRequestContext>) {
        for method in [HTTPRequest.Method.get, .post] {
            router.on("count", method: method) { _, _ in
                let count = self.value.withLockedValue { count in
                    count += 1
                    return count
                }
                return String(count)
            }
        }
    }
}

/// A gzipped text answer.
private enum GzipRoute {
    static let text = String(repeating: "compressed text ", count: 64)

    static func install(_ router: Router<BasicRequestContext>) {
        router.get("gzip") { _, _ in
            var buffer = ByteBuffer(string: text)
            let compressed = try buffer.compress(with: .gzip())
            return Hummingbird.Response(
                status: .ok,
                headers: [.contentType: "text/plain; charset=utf-8", .contentEncoding: "gzip"],
                body: .init(byteBuffer: compressed)
            )
        }
    }
}

/// An event stream that sends its next event only when the test says so: each event arrives
/// in a part of its own, whatever the machine's speed.
private final class SignalledTicks: Sendable {
    private let signals: AsyncStream<Void>
    private let signal: AsyncStream<Void>.Continuation

    init() {
        (signals, signal) = AsyncStream.makeStream(of: Void.self)
    }

    func next() { signal.yield() }

    func install(_ router: Router<BasicRequestContext>) {
        router.get("ticks") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "text/event-stream"], body: Hummingbird.ResponseBody { writer in
                var signals = self.signals.makeAsyncIterator()
                for tick in 1...3 {
                    if tick > 1 { _ = await signals.next() }
                    try await writer.write(ByteBuffer(string: "id: \(tick)\ndata: tick \(tick)\n\n"))
                }
                _ = await signals.next()
                try await writer.finish(nil)
            })
        }
    }
}

/// Checks a HAR file against HAR 1.2's structure: every field the specification requires, of
/// the type it says, read as plain JSON (not through the types that wrote it).
enum HARStructure {
    struct Violation: Error, CustomStringConvertible {
        let description: String
    }

    static func validate(_ data: Data, entries expected: Int? = nil) throws {
        guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { throw Violation(description: "the root is not an object") }
        let log = try object(root, "log", at: "")
        guard try string(log, "version", at: "log") == "1.2" else { throw Violation(description: "log.version is not 1.2") }
        let creator = try object(log, "creator", at: "log")
        _ = try string(creator, "name", at: "log.creator")
        _ = try string(creator, "version", at: "log.creator")
        let entries = try array(log, "entries", at: "log")
        if let expected, entries.count != expected { throw Violation(description: "\(entries.count) entries, not \(expected)") }
        for (index, value) in entries.enumerated() {
            let at = "log.entries[\(index)]"
            guard let entry = value as? [String: Any] else { throw Violation(description: "\(at) is not an object") }
            let started = try string(entry, "startedDateTime", at: at)
            guard ISO8601DateFormatter.withFractionalSeconds.date(from: started) != nil else { throw Violation(description: "\(at).startedDateTime is not ISO 8601: \(started)") }
            _ = try number(entry, "time", at: at)
            _ = try object(entry, "cache", at: at)
            let request = try object(entry, "request", at: at)
            for key in ["method", "url", "httpVersion"] { _ = try string(request, key, at: at + ".request") }
            for key in ["headersSize", "bodySize"] { _ = try number(request, key, at: at + ".request") }
            try pairs(request, "cookies", at: at + ".request")
            try pairs(request, "headers", at: at + ".request")
            try pairs(request, "queryString", at: at + ".request")
            if let postData = request["postData"] {
                guard let postData = postData as? [String: Any] else { throw Violation(description: "\(at).request.postData is not an object") }
                _ = try string(postData, "mimeType", at: at + ".request.postData")
            }
            let response = try object(entry, "response", at: at)
            for key in ["statusText", "httpVersion", "redirectURL"] { _ = try string(response, key, at: at + ".response") }
            for key in ["status", "headersSize", "bodySize"] { _ = try number(response, key, at: at + ".response") }
            try pairs(response, "cookies", at: at + ".response")
            try pairs(response, "headers", at: at + ".response")
            let content = try object(response, "content", at: at + ".response")
            _ = try number(content, "size", at: at + ".response.content")
            _ = try string(content, "mimeType", at: at + ".response.content")
            let timings = try object(entry, "timings", at: at)
            for key in ["send", "wait", "receive"] {
                guard try number(timings, key, at: at + ".timings") >= 0 else { throw Violation(description: "\(at).timings.\(key) is negative") }
            }
        }
    }

    private static func object(_ parent: [String: Any], _ key: String, at path: String) throws -> [String: Any] {
        guard let value = parent[key] as? [String: Any] else { throw Violation(description: "\(path).\(key) is missing or not an object") }
        return value
    }

    private static func array(_ parent: [String: Any], _ key: String, at path: String) throws -> [Any] {
        guard let value = parent[key] as? [Any] else { throw Violation(description: "\(path).\(key) is missing or not an array") }
        return value
    }

    private static func string(_ parent: [String: Any], _ key: String, at path: String) throws -> String {
        guard let value = parent[key] as? String else { throw Violation(description: "\(path).\(key) is missing or not a string") }
        return value
    }

    private static func number(_ parent: [String: Any], _ key: String, at path: String) throws -> Double {
        guard let value = parent[key] as? NSNumber, !(parent[key] is Bool) || value is Int else { throw Violation(description: "\(path).\(key) is missing or not a number") }
        return value.doubleValue
    }

    /// An array of objects each with a string `name` and `value`.
    private static func pairs(_ parent: [String: Any], _ key: String, at path: String) throws {
        for (index, item) in try array(parent, key, at: path).enumerated() {
            guard let item = item as? [String: Any] else { throw Violation(description: "\(path).\(key)[\(index)] is not an object") }
            _ = try string(item, "name", at: "\(path).\(key)[\(index)]")
            _ = try string(item, "value", at: "\(path).\(key)[\(index)]")
        }
    }
}

extension ISO8601DateFormatter {
    fileprivate static var withFractionalSeconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
