import AsyncHTTPClient
import Foundation
import NIOCore
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import Testing
import Trellis

@Service
protocol HostileAPI {
    @GET("/record")
    func record(at: Date) async throws -> String

    @GET("/silent")
    @Timeout(.milliseconds(300))
    func silent() async throws -> String

    @GET("/items/{name}")
    func item(name: String) async throws -> String
}

/// Sets the timeout of every request, as a middleware may.
private struct ShortTimeout: Middleware {
    let timeout: Duration

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        var request = request
        request.timeout = timeout
        return try await next(request)
    }
}

/// One regression test per hole a misbehaving server found (the pipeline issue), against
/// ``HostileServer``, over both transports where the hole was in a transport.
@Suite("Hostile servers", .hangGuard)
struct HostileServerTests {
    private func get(_ url: URL, _ path: String) throws -> Request {
        try Request(method: .get, url: URL(string: url.absoluteString + path)!)
    }

    private func timeoutFailure(_ error: TrellisError?) -> TimeoutFailure? {
        if case .timedOut(let failure) = error { return failure }
        Issue.record("expected timedOut, got \(String(describing: error))")
        return nil
    }

    private func status(of error: TrellisError?) -> Int? {
        if case .unacceptableStatus(let failure) = error { return failure.status.code }
        Issue.record("expected unacceptableStatus, got \(String(describing: error))")
        return nil
    }

    // MARK: Credentials per hop

    @Test(arguments: TransportKind.allCases)
    func credentialsDoNotFollowARedirectToAnotherOrigin(_ kind: TransportKind) async throws {
        try await HostileServer.with { a in
            try await HostileServer.with { b in
                let client = Client(
                    baseURL: a.url,
                    transport: kind.transport,
                    middlewares: [
                        try APIKey(.header("X-API-Key"), "key-for-a", origin: a.url),
                        try APIKey(.query("sig"), "query-key-for-the-call"),
                        BasicAuthentication(username: "ada", password: "lovelace"),
                        try APIKey(.header("X-B-Key"), "key-for-b", origin: b.url),
                    ]
                )
                let target = b.url.absoluteString + "/record"
                let body = try await client.value(for: get(a.url, "/redirect?to=\(target)"), as: String.self)
                #expect(body == "ok")
                // URLSession sends header names in its own case.
                let atA = try #require(a.heads.first).lowercased()
                #expect(atA.contains("x-api-key: key-for-a"))
                #expect(atA.contains("sig=query-key-for-the-call"))
                #expect(atA.contains("authorization: basic"))
                #expect(!atA.contains("key-for-b"))
                let atB = try #require(b.heads.first).lowercased()
                #expect(!atB.contains("key-for-a"))
                #expect(!atB.contains("query-key-for-the-call"))
                #expect(!atB.contains("authorization"))
                // Decided again on the hop: the key for B is added there.
                #expect(atB.contains("x-b-key: key-for-b"))
            }
        }
    }

    // MARK: Timeouts

    // A deadline that never fires would leave these calls waiting forever: the limit makes it
    // a failure.
    @Test(.hangGuard, arguments: TransportKind.allCases)
    func aTimeoutSetByAMiddlewareOrAnEndpointIsTheOneApplied(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport, middlewares: [ShortTimeout(timeout: .milliseconds(250))])
            let byMiddleware = await #expect(throws: TrellisError.self) { try await client.perform(get(server.url, "/silent")) }
            #expect(timeoutFailure(byMiddleware)?.timeout == .milliseconds(250))

            let api = HostileAPIService(client: Client(baseURL: server.url, transport: kind.transport))
            let byEndpoint = await #expect(throws: TrellisError.self) { try await api.silent() }
            #expect(timeoutFailure(byEndpoint)?.timeout == .milliseconds(300))
        }
    }

    // A broken idle timer would leave the streams waiting forever: the limit makes it a failure.
    @Test(.hangGuard, arguments: TransportKind.allCases)
    func stalledStreamsEndAtTheIdleTimeout(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            // The request timeout stays long: what ends these waits is the idle timeout (long
            // enough that a loaded machine still delivers the bytes that do come in time).
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.timeouts.idle = .seconds(3) }
            let download = await #expect(throws: TrellisError.self) {
                try await client.download(for: get(server.url, "/stall-body"))
            }
            #expect(timeoutFailure(download)?.waitingFor == "the next byte of the body")

            var events = client.events(for: try get(server.url, "/stall-events"), reconnects: false).makeAsyncIterator()
            #expect(try await events.next()?.data == "one")
            let stalledEvents = await #expect(throws: TrellisError.self) { _ = try await events.next() }
            #expect(timeoutFailure(stalledEvents)?.timeout == .seconds(3))

            switch kind {
            case .asyncHTTPClient:
                // A redirect's body being discarded stalls too: the redirect is followed all
                // the same.
                let followed = try await client.send(get(server.url, "/stall-redirect?to=/record"))
                #expect(followed.status == .ok)
                #expect(String(buffer: try await followed.body.collect(upTo: 100)) == "ok")
            case .urlSession:
                // FoundationNetworking hands over a redirect only once its body is complete, so
                // the request timeout is what ends the wait there.
                let impatient = Client(baseURL: server.url, transport: kind.transport) {
                    $0.timeouts.idle = .seconds(1)
                    $0.timeouts.request = .seconds(2)
                }
                let stalled = await #expect(throws: TrellisError.self) {
                    try await impatient.send(get(server.url, "/stall-redirect?to=/record"))
                }
                #expect(timeoutFailure(stalled)?.timeout == .seconds(2))
            }
        }
    }

    /// A header line every 200 ms keeps a timer that waits for the next byte from firing
    /// (libcurl's, under URLSession, waited on past 12 s): a streamed call's head must still
    /// come within the request timeout. The server trickles on for 5 minutes: a transport that
    /// waits for it fails the test at its time limit.
    @Test(.hangGuard, arguments: TransportKind.allCases)
    func aHeadThatTricklesInEndsAtTheRequestTimeout(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.timeouts.request = .seconds(2) }
            let download = await #expect(throws: TrellisError.self) { try await client.download(for: get(server.url, "/trickle-head")) }
            #expect(timeoutFailure(download)?.timeout == .seconds(2))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func absurdDurationsDoNotTrap(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let sleeper = RecordingSleeper()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.timeouts.request = .seconds(Int64.max)
                $0.timeouts.idle = .seconds(Int64.max)
                sleeper.retry(&$0, maximumRetries: 100) { $0.maximumTotalDelay = .seconds(10_000_000) }
            }
            let record = try await client.value(for: get(server.url, "/record"), as: String.self)
            #expect(record == "ok")
            let error = await #expect(throws: TrellisError.self) { try await client.perform(get(server.url, "/503")) }
            #expect(status(of: error) == 503)
            #expect(sleeper.recorded.count == 100)
            #expect(sleeper.recorded.allSatisfy { $0 <= .seconds(30) })
        }
    }

    // MARK: Limits

    /// The flood never ends, so only the client's closing the connection ends it: a client that
    /// read on, or kept the connection open after it stopped, fails at the time limit. The
    /// request timeout is longer than that, so that the transport's own timeout cannot be what
    /// closes it.
    @Test(.hangGuard, arguments: TransportKind.allCases)
    func aBodyOverTheLimitStopsTheTransfer(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.limits.maximumBodySize = 1 << 20
                $0.timeouts.request = .seconds(600)
            }
            let error = await #expect(throws: TrellisError.self) { try await client.perform(get(server.url, "/flood")) }
            guard case .responseTooLarge = error else {
                Issue.record("expected responseTooLarge, got \(String(describing: error))")
                return
            }
            // How far the server got before the client went away depends on the machine's
            // speed and load, through URLSession from a few megabytes to the whole 4 GiB, since
            // FoundationNetworking hands each piece to the session's delegate through a queue
            // without bound. So what is checked is that the client went away.
            var ended = server.floodEnded.makeAsyncIterator()
            #expect(await ended.next() != nil)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func anEndlessEventFailsAtTheEventLimit(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.limits.maximumEventSize = 64 * 1024 }
            var events = client.events(for: try get(server.url, "/endless-event")).makeAsyncIterator()
            let error = await #expect(throws: TrellisError.self) { _ = try await events.next() }
            guard case .responseTooLarge(let failure) = error else {
                Issue.record("expected responseTooLarge, got \(String(describing: error))")
                return
            }
            #expect(failure.description == "a server-sent event is larger than the limit of 65536 bytes")
            #expect(server.connectionsOpened == 1)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func reconnectionWaitsHaveAFloorAndBackOff(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let clock = StoppingClock(stopsAt: 5)
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.retry = RetryPolicy()
                $0.clock = clock
            }
            var events = client.events(for: try get(server.url, "/retry-zero")).makeAsyncIterator()
            await #expect(throws: CancellationError.self) { _ = try await events.next() }
            #expect(clock.waits == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4)])
            #expect(server.connectionsOpened == 5)
        }
    }

    /// An event stream whose framing breaks HTTP ends with the error, without reconnecting:
    /// the same server would break it the same way, again and again.
    @Test(arguments: TransportKind.allCases)
    func anEventStreamThatBreaksHTTPIsNotReconnected(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport) {
                // A reconnection is not waited for, and the third ends the stream.
                $0.retry = RetryPolicy()
                $0.clock = StoppingClock(stopsAt: 3)
            }
            var events = client.events(for: try get(server.url, "/broken-events")).makeAsyncIterator()
            // The event before the break may be lost with it (AsyncHTTPClient fails the body
            // when the parser does, dropping what it had not handed over yet).
            let error = await #expect(throws: TrellisError.self) {
                while let event = try await events.next() { #expect(event.data == "one") }
            }
            guard case .connectionFailed(let failure) = error else {
                Issue.record("expected connectionFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.reason.contains("not a valid HTTP/1.1 response"), "\(failure.reason)")
            #expect(try await events.next() == nil, "the stream has ended")
            #expect(server.heads.filter { $0.hasPrefix("GET /broken-events ") }.count == 1)
        }
    }

    // MARK: Responses checked against what was asked

    @Test(arguments: TransportKind.allCases)
    func aPartialResponseNobodyAskedForIsRefused(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport)
            let destination = FileManager.default.temporaryDirectory.appendingPathComponent("trellis-partial-\(UUID().uuidString)")
            let download = await #expect(throws: TrellisError.self) {
                try await client.download(for: get(server.url, "/partial"), to: destination)
            }
            #expect(status(of: download) == 206)
            #expect(!FileManager.default.fileExists(atPath: destination.path))
            let buffered = await #expect(throws: TrellisError.self) { try await client.perform(get(server.url, "/partial")) }
            #expect(status(of: buffered) == 206)

            // Asked for, it is the answer.
            var ranged = try get(server.url, "/partial")
            ranged.headerFields[.range] = "bytes=0-99"
            let part = try await client.download(for: ranged, to: destination)
            #expect(part.byteCount == 100)
            try? FileManager.default.removeItem(at: destination)
        }
    }

    // MARK: Values sent

    @Test func datesGoOutWhole() async throws {
        try await HostileServer.with { server in
            let api = HostileAPIService(client: Client(baseURL: server.url))
            _ = try await api.record(at: Date(timeIntervalSince1970: 1.5))
            #expect(server.heads.first?.hasPrefix("GET /record?at=1970-01-01T00%3A00%3A01.500Z ") == true)
            #expect(Date(timeIntervalSince1970: 86_400).parameterValue == "1970-01-02T00:00:00Z")
        }
    }

    @Test(arguments: [".", ".."])
    func dotSegmentsAreRefusedAsPathValues(_ value: String) async throws {
        try await HostileServer.with { server in
            let api = HostileAPIService(client: Client(baseURL: server.url))
            let error = await #expect(throws: TrellisError.self) { try await api.item(name: value) }
            guard case .invalidRequest(let failure) = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                return
            }
            #expect(failure.description.contains("dot segment"))
            #expect(server.heads.isEmpty)
        }
    }

    // MARK: Connections

    @Test(arguments: TransportKind.allCases)
    func aRequestOnAConnectionTheServerClosedGoesOutAgain(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport)
            let first = try await client.value(for: get(server.url, "/once-per-connection"), as: String.self)
            let second = try await client.value(for: get(server.url, "/once-per-connection"), as: String.self)
            #expect([first, second] == ["first", "first"])
            #expect(server.connectionsOpened == 2)
        }
    }

    /// A response no request asked for, sent on an idle keep-alive connection, never answers
    /// the next request: AsyncHTTPClient closes the connection it came on. (libcurl, under
    /// FoundationNetworking, hands it to the next request; see the Connectivity article's transports.)
    @Test func aResponseNobodyAskedForNeverAnswersTheNextRequest() async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: TransportKind.asyncHTTPClient.transport)
            var closures = server.closures.makeAsyncIterator()
            let first = try await client.value(for: get(server.url, "/late-response"), as: String.self)
            // The stray response arrived and the connection it came on is gone.
            await closures.next()
            let second = try await client.value(for: get(server.url, "/record"), as: String.self)
            #expect([first, second] == ["ok", "ok"])
            #expect(server.connectionsOpened == 2)
        }
    }

    /// A chunked body with a trailer field reads as its chunks over AsyncHTTPClient.
    /// FoundationNetworking (swift-corelibs-foundation 6.3.1) traps the process on the same
    /// response ("Transfer completed, but there's no response"; likely libcurl handing the
    /// trailer over as a header line after the body, not confirmed in its source); a plain
    /// `URLSession.shared.dataTask` traps the same way. Trellis sees nothing
    /// of it before the trap; add the URLSession case once a toolchain's FoundationNetworking
    /// takes a trailer.
    @Test(arguments: [TransportKind.asyncHTTPClient])
    func aChunkedBodyWithATrailerReadsWhole(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport)
            let text = try await client.value(for: get(server.url, "/chunked-trailer"), as: String.self)
            #expect(text == "ok")
        }
    }

    /// A server that refuses an upload on sight of its head, while the body is on its way,
    /// five times each way. URLSession delivers the refusal. AsyncHTTPClient closes the
    /// connection under the unfinished upload once the refusal has ended and then fails the
    /// exchange, dropping the refusal's body every time with a body in memory and about one
    /// time in five with a streamed one (see the Connectivity article's transports). The failure then names
    /// the status, when AsyncHTTPClient had handed the head over: always with a body in memory;
    /// with a streamed one it sometimes fails before.
    @Test(arguments: TransportKind.allCases)
    func anUploadRefusedEarlyReportsTheRefusal(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            // Not a test of timeouts: under ThreadSanitizer beside a busy core, URLSession took
            // past the default minute to give up a streamed upload of 64 MiB. 8 MiB is still
            // on its way when the refusal comes, as the body in memory is.
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.timeouts = .patient }
            let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 << 10)
            let bodies: [(String, @Sendable () -> RequestBody)] = [
                ("in memory", { RequestBody(Data(repeating: 0x78, count: 8 << 20)) }),
                ("streamed", {
                    let chunks = AsyncStream<ByteBuffer> { sink in
                        for _ in 0..<128 { sink.yield(chunk) }
                        sink.finish()
                    }
                    return RequestBody(stream: chunks, length: 128 * Int64(chunk.readableBytes))
                }),
            ]
            for (label, makeBody) in bodies {
                for attempt in 1...5 {
                    let request = try Request(method: .post, url: URL(string: server.url.absoluteString + "/refuse-upload")!, body: makeBody())
                    let error = await #expect(throws: TrellisError.self) { try await client.data(for: request) }
                    switch (kind, error) {
                    case (_, .unacceptableStatus(let failure)?):
                        #expect(failure.status.code == 413)
                        #expect(String(decoding: failure.body, as: UTF8.self) == "too big")
                    case (.asyncHTTPClient, .connectionFailed(let failure)?) where label == "in memory":
                        #expect(failure.reason.contains("answered 413 "), "\(label): \(failure.reason)")
                    case (.asyncHTTPClient, .connectionFailed?):
                        break
                    default:
                        Issue.record("\(label), attempt \(attempt): expected the 413, got \(String(describing: error))")
                    }
                }
            }
        }
    }

    /// A server answering in another protocol, or with a header section that never ends,
    /// fails the call with an error that says so, well before its deadline, and the client lets
    /// the connection go rather than read on.
    @Test(arguments: TransportKind.allCases)
    func anAnswerThatIsNotHTTPFailsAtOnce(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            // A timeout longer than the suite's time limit: only failing on the fault itself passes.
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.timeouts.request = .seconds(300) }
            for path in ["/not-http", "/endless-headers"] {
                let error = await #expect(throws: TrellisError.self) { try await client.data(for: get(server.url, path)) }
                guard case .connectionFailed(let failure) = error else {
                    Issue.record("\(path): expected connectionFailed, got \(String(describing: error))")
                    continue
                }
                if path == "/not-http" {
                    #expect(failure.reason.contains("not a valid HTTP/1.1 response"), "\(failure.reason)")
                } else {
                    #expect(failure.reason.contains("header fields went past"), "\(failure.reason)")
                }
            }
            var floods = server.floodEnded.makeAsyncIterator()
            let flooded = try #require(await floods.next())
            #expect(flooded < 16 << 20, "the client read \(flooded) bytes of headers")
        }
    }

    /// A body whose length cannot be known for sure (two lengths, a length beside chunking, a
    /// length or a chunk size too large to be one) fails the call at once: taking one reading
    /// of it would hand the caller bytes that another reader, a proxy, takes differently.
    @Test(arguments: TransportKind.allCases)
    func aBodyOfNoSureLengthFailsAtOnce(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.timeouts.request = .seconds(300) }
            for path in ["/conflicting-lengths", "/length-and-chunked", "/overlong-length", "/overlong-chunk"] {
                let error = await #expect(throws: TrellisError.self, "\(path)") { try await client.data(for: get(server.url, path)) }
                guard case .connectionFailed(let failure) = error else {
                    Issue.record("\(path): expected connectionFailed, got \(String(describing: error))")
                    continue
                }
                #expect(failure.reason.contains("not a valid HTTP/1.1 response"), "\(path): \(failure.reason)")
            }
        }
    }

    /// An answer that breaks HTTP itself is not sent for again, whatever the retry policy: the
    /// same server would give the same answer, and each retry would only wait and repeat it.
    @Test(arguments: TransportKind.allCases)
    func anAnswerThatIsNotHTTPIsNotRetried(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let log = EventLog()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 3))
                // Not about timeouts: under ThreadSanitizer beside a build, the four sends of
                // `/cut-short` once ran out of the default minute after three.
                $0.timeouts = .patient
                $0.observability.eventMonitors = [log]
            }
            // A status under 100 (`/status-000`) would trap the process inside AsyncHTTPClient
            // 1.37 if it got there (see `ResponseStatusGuard`).
            let statuses = ["/status-1000", "/status-99", "/status-000"]
            await expectSentOnce(["/not-http", "/endless-headers", "/conflicting-lengths", "/length-and-chunked", "/overlong-chunk"] + statuses, to: server, by: client)
            // A body cut short is still retried: the policy is in force. (URLSession may count
            // the break as a stale connection's, which is sent once more besides.)
            let cut = await #expect(throws: TrellisError.self) { try await client.data(for: get(server.url, "/cut-short")) }
            if case .connectionFailed(let failure) = cut {
                #expect(!failure.reason.contains("not a valid"), "a cut is not a malformed answer: \(failure.reason)")
            }
            // Three retries, as the policy says. The server may see fewer sends: an attempt
            // that fails before its request is written (a connect that runs out on a loaded
            // machine) is retried without reaching it. It saw three in two loaded runs.
            let retries = log.events.filter { $0.hasPrefix("retry ") }
            #expect(retries.count == 3, "\(retries)")
            let sent = server.heads.filter { $0.hasPrefix("GET /cut-short ") }.count
            #expect((2...5).contains(sent), "/cut-short was sent \(sent) times: \(retries)")
        }
    }

    /// AsyncHTTPClient 1.37.0 (and its main branch of April 2026) takes a status under 100 for
    /// an informational one and passes over the head, then traps on the body or the end that
    /// follows ("How can we receive a response body, if we haven't received a head"). The
    /// transport's guard refuses the head first, on every kind of call: a buffered one, a
    /// stream, and a call after the refused one, which needs a connection of its own.
    @Test func aStatusUnder100FailsOverAsyncHTTPClientInsteadOfTrapping() async throws {
        try await HostileServer.with { server in
            let transport = AsyncHTTPClientTransport()
            let client = Client(baseURL: server.url, transport: transport)
            for _ in 0..<2 {
                let error = await #expect(throws: TrellisError.self) { try await client.data(for: get(server.url, "/status-000")) }
                guard case .connectionFailed(let failure) = error else {
                    Issue.record("expected connectionFailed, got \(String(describing: error))")
                    continue
                }
                #expect(failure.reason.contains("not a valid HTTP/1.1 response"), "\(failure.reason)")
            }
            await #expect(throws: TrellisError.self) {
                let response = try await client.send(get(server.url, "/status-000"))
                _ = try await response.body.collect(upTo: 1 << 20)
            }
            #expect(server.heads.filter { $0.hasPrefix("GET /status-000 ") }.count == 3, "each refused answer is final")
            // The client goes on: a refused answer's connection is closed, not reused.
            let after = try await client.data(for: get(server.url, "/record"))
            #expect(String(decoding: after.body, as: UTF8.self) == "ok")
            try await transport.shutdown()
        }
    }

    /// HTTP/2 carries a status under 100 to AsyncHTTPClient as well (SwiftNIO's HTTP/2 codec
    /// takes any integer for `:status`), where it would trap the process the same way; a
    /// negative one traps the codec itself. The guard on each stream refuses both.
    @Test func aStatusUnder100OverHTTP2FailsInsteadOfTrapping() async throws {
        try await HostileHTTP2Server.with { server in
            let transport = http2Transport(trusting: server)
            let client = Client(baseURL: server.url, transport: transport)
            try await expectRefusedOnceOverHTTP2(["/status-000", "/status-negative"], by: client, from: server) { reason in
                reason.contains("not a valid HTTP/2 response")
            }
            try await transport.shutdown()
        }
    }

    /// An HTTP/2 answer without `:status`, or whose body is longer or shorter than its
    /// `content-length`, fails its call at once (SwiftNIO's codec closes the stream with
    /// PROTOCOL_ERROR), names the fault, and is not sent again, whatever the retry policy.
    @Test(.hangGuard) func anHTTP2AnswerThatBreaksTheProtocolFailsAtOnceAndIsNotRetried() async throws {
        try await HostileHTTP2Server.with { server in
            let transport = http2Transport(trusting: server)
            let client = Client(baseURL: server.url, transport: transport) {
                $0.timeouts.request = .seconds(600)
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 3))
            }
            let paths = ["/no-status", "/longer-than-announced", "/shorter-than-announced"]
            try await expectRefusedOnceOverHTTP2(paths, by: client, from: server) { reason in
                reason.contains("PROTOCOL_ERROR") && reason.contains(":status")
            }
            try await transport.shutdown()
        }
    }

    /// The limits and timeouts hold over HTTP/2 as over HTTP/1: a body over the limit resets
    /// its stream, which ends the flood (it never ends otherwise, so a client that read on
    /// fails at the time limit), and a stalled body ends at the idle timeout or the deadline.
    @Test(.hangGuard) func limitsAndTimeoutsHoldOverHTTP2() async throws {
        try await HostileHTTP2Server.with { server in
            let transport = http2Transport(trusting: server)
            let client = Client(baseURL: server.url, transport: transport) {
                $0.limits.maximumBodySize = 1 << 20
                $0.timeouts.request = .seconds(600)
                $0.timeouts.idle = .seconds(3)
            }
            let tooLarge = await #expect(throws: TrellisError.self) { try await client.perform(get(server.url, "/flood")) }
            guard case .responseTooLarge = tooLarge else {
                Issue.record("expected responseTooLarge, got \(String(describing: tooLarge))")
                return
            }
            var ended = server.floodEnded.makeAsyncIterator()
            let flooded = try #require(await ended.next())
            // Flow control holds the server to what the client has taken, plus one window.
            #expect(flooded < 64 << 20, "the server sent \(flooded) bytes before the stream was reset")

            let download = await #expect(throws: TrellisError.self) { try await client.download(for: get(server.url, "/stall-body")) }
            #expect(timeoutFailure(download)?.waitingFor == "the next byte of the body")

            let impatient = Client(baseURL: server.url, transport: transport) { $0.timeouts.request = .seconds(1) }
            let buffered = await #expect(throws: TrellisError.self) { try await impatient.data(for: get(server.url, "/stall-body")) }
            #expect(timeoutFailure(buffered)?.timeout == .seconds(1))
            // SwiftNIO's codec refuses a header block past its limit; the connection is closed
            // then, and the call fails at once, by name, without being sent again.
            let patient = Client(baseURL: server.url, transport: transport) { $0.timeouts.request = .seconds(600) }
            let bomb = await #expect(throws: TrellisError.self) { try await patient.data(for: get(server.url, "/header-bomb")) }
            guard case .connectionFailed(let failure) = bomb else {
                Issue.record("expected connectionFailed, got \(String(describing: bomb))")
                return
            }
            #expect(failure.reason.contains("not a valid HTTP/2 response"), "\(failure.reason)")
            #expect(server.requestedPaths.filter { $0 == "/header-bomb" }.count == 1)
            // A stream the server resets mid-body fails at once, with the code by its name when
            // AsyncHTTPClient passes it on. It sometimes reports the reset as a cancellation
            // instead, which must not reach a caller that cancelled nothing: 20 runs.
            for _ in 0..<20 {
                let reset = await #expect(throws: TrellisError.self) { try await patient.data(for: get(server.url, "/reset")) }
                guard case .connectionFailed(let resetFailure) = reset else {
                    Issue.record("expected connectionFailed, got \(String(describing: reset))")
                    return
                }
                let reasons = ["closed with INTERNAL_ERROR", "gave up on the exchange"]
                #expect(reasons.contains { resetFailure.reason.contains($0) }, "\(resetFailure.reason)")
            }
            try await transport.shutdown()
        }
    }

    /// A transport whose TLS trusts the HTTP/2 server's test authority.
    private func http2Transport(trusting server: HostileHTTP2Server) -> AsyncHTTPClientTransport {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([server.certificates.authority])
        configuration.tlsConfiguration = tls
        return AsyncHTTPClientTransport(configuration: configuration)
    }

    /// Each of `paths` fails with `connectionFailed`, having reached the server once.
    private func expectSentOnce(_ paths: [String], to server: HostileServer, by client: Client) async {
        for path in paths {
            let error = await #expect(throws: TrellisError.self, "\(path)") { try await client.data(for: get(server.url, path)) }
            guard case .connectionFailed(let failure) = error else {
                Issue.record("\(path): expected connectionFailed, got \(String(describing: error))")
                continue
            }
            let sent = server.heads.filter { $0.hasPrefix("GET \(path) ") }.count
            #expect(sent == 1, "\(path) was sent \(sent) times (\(failure.reason))")
        }
    }

    /// Each of `paths` fails with a `connectionFailed` whose reason `names` accepts, each is sent
    /// once (the answer breaks HTTP, so the retry stage does not send it again), and the
    /// connection's other streams are unharmed.
    private func expectRefusedOnceOverHTTP2(
        _ paths: [String],
        by client: Client,
        from server: HostileHTTP2Server,
        naming names: (String) -> Bool
    ) async throws {
        for path in paths {
            let error = await #expect(throws: TrellisError.self, "\(path)") { try await client.data(for: get(server.url, path)) }
            guard case .connectionFailed(let failure) = error else {
                Issue.record("\(path): expected connectionFailed, got \(String(describing: error))")
                continue
            }
            #expect(names(failure.reason), "\(path): \(failure.reason)")
        }
        #expect(server.requestedPaths == paths)
        let after = try await client.data(for: get(server.url, "/other"))
        #expect(String(decoding: after.body, as: UTF8.self) == "ok")
    }

    /// Informational heads (`100 Continue`) without end: the call ends, at the latest at its
    /// deadline, and the connection with it.
    @Test(arguments: TransportKind.allCases)
    func endlessInformationalHeadsEndByTheDeadline(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport) { $0.timeouts.request = .seconds(2) }
            let error = await #expect(throws: TrellisError.self) { try await client.data(for: get(server.url, "/endless-informational")) }
            switch error {
            case .timedOut?, .connectionFailed?: break  // AsyncHTTPClient skips each; libcurl counts them as header bytes
            default: Issue.record("expected timedOut or connectionFailed, got \(String(describing: error))")
            }
            var floods = server.floodEnded.makeAsyncIterator()
            let flooded = try #require(await floods.next())
            #expect(flooded < HostileServer.floodLimit)
        }
    }

    /// An informational head before the answer (`103 Early Hints`) is passed over, and the
    /// answer is the 200 that follows. FoundationNetworking on Linux reports the 103 instead,
    /// with the 200's body: the transport refuses that as an answer it cannot trust, by name,
    /// rather than hand on a status and a body that do not belong together.
    @Test(arguments: TransportKind.allCases)
    func anInformationalHeadBeforeTheAnswerIsPassedOver(_ kind: TransportKind) async throws {
        try await HostileServer.with { server in
            let client = Client(baseURL: server.url, transport: kind.transport)
            #if canImport(FoundationNetworking)
            if kind == .urlSession {
                let error = await #expect(throws: TrellisError.self) { try await client.data(for: get(server.url, "/early-hints")) }
                guard case .connectionFailed(let failure) = error else {
                    Issue.record("expected connectionFailed, got \(String(describing: error))")
                    return
                }
                #expect(failure.reason.contains("informational status 103"), "\(failure.reason)")
                return
            }
            #endif
            let response = try await client.data(for: get(server.url, "/early-hints"))
            #expect(response.status == .ok)
            #expect(String(decoding: response.body, as: UTF8.self) == "ok")
        }
    }

    // MARK: Redaction and files

    @Test(arguments: TransportKind.allCases)
    func logsAndErrorsCarryNoCredential(_ kind: TransportKind) async throws {
        let records = LogCapture()
        var logger = Logger(label: "trellis-hostile") { _ in records }
        logger.logLevel = .debug
        try await HostileServer.with { server in
            let client = Client(
                baseURL: server.url,
                transport: kind.transport,
                middlewares: [
                    try APIKey(.header("X-Tenant-Secret"), "header-secret"),
                    try APIKey(.query("sig"), "query-secret"),
                ]
            ) { $0.logger = logger }
            _ = try await client.value(for: get(server.url, "/redirect?to=/record&api_key=url-secret"), as: String.self)
            var silent = try get(server.url, "/silent?access_token=url-secret")
            silent.timeout = .milliseconds(200)
            let error = await #expect(throws: TrellisError.self) { try await client.perform(silent) }
            let text = records.messages.joined(separator: "\n") + "\n" + String(describing: error)
            #expect(text.contains("/silent"))
            for secret in ["header-secret", "query-secret", "url-secret"] {
                #expect(!text.contains(secret), "\(secret) was logged")
            }
            #expect(server.heads.first?.contains("X-Tenant-Secret: header-secret") == true)
        }
    }

    @Test func aDownloadIsWrittenPrivatelyAndNeverThroughAPlantedLink() async throws {
        try await HostileServer.with { server in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("trellis-link-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let victim = folder.appendingPathComponent("victim")
            try Data("precious".utf8).write(to: victim)
            let destination = folder.appendingPathComponent("download")
            try FileManager.default.createSymbolicLink(atPath: destination.path + ".trellis-partial", withDestinationPath: victim.path)

            let file = try await Client(baseURL: server.url).download(for: get(server.url, "/record"), to: destination)
            #expect(try String(contentsOf: file.url, encoding: .utf8) == "ok")
            #expect(try String(contentsOf: victim, encoding: .utf8) == "precious")
            let permissions = try FileManager.default.attributesOfItem(atPath: destination.path)[.posixPermissions] as? Int
            #expect(permissions == 0o600)
        }
    }

    @Test func pinsApplyHoweverTheHostIsWritten() throws {
        let key = try PublicKeyPin(String(repeating: "A", count: 43) + "=")
        let pinning = try CertificatePinning([
            PinnedHost("api.example.com", publicKeys: [key]),
            PinnedHost("::1", publicKeys: [key]),
            PinnedHost("127.0.0.1", publicKeys: [key]),
        ])
        for host in ["API.Example.COM", "api.example.com.", "[::1]", "0:0:0:0:0:0:0:1", "[0000::0001]", "127.1", "127.0.0.1."] {
            #expect(pinning.pins(for: host) != nil, "\(host) escaped its pins")
        }
        #expect(pinning.pins(for: "example.com") == nil)
    }
}

/// A clock whose waits return at once, recorded, until the one numbered `stopsAt`, which
/// throws `CancellationError` as a cancelled caller's would: the end of an endless reconnection.
private final class StoppingClock: ClientClock {
    private let recorded = NIOLockedValueBox<[Duration]>([])
    private let stopsAt: Int

    init(stopsAt: Int) { self.stopsAt = stopsAt }

    var waits: [Duration] { recorded.withLockedValue { $0 } }
    var now: Date { Date() }
    var instant: ContinuousClock.Instant { .now }

    func sleep(for duration: Duration) async throws {
        let count = recorded.withLockedValue { $0.append(duration); return $0.count }
        if count == stopsAt { throw CancellationError() }
    }
}
