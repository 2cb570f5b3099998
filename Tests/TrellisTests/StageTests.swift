import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import Trellis
import TrellisTesting

/// Each built-in stage alone, in front of a MockTransport: `stage.intercept(request, call,
/// next:)` with the mock as `next`.
@Suite("Pipeline stages, one at a time")
struct StageTests {
    private let base = URL(string: "https://api.test")!

    private func request(_ path: String, method: HTTPRequest.Method = .get, body: RequestBody? = nil) throws -> Request {
        try Request(method: method, url: URL(string: "https://api.test" + path)!, body: body)
    }

    /// The rest of a pipeline that is only `mock`.
    private func sending(to mock: MockTransport) -> Stage.Next {
        Pipeline.Next(pipeline: Pipeline(stages: [], transport: mock), from: 0)
    }

    /// The rest of a pipeline that is only `body`.
    private func then(_ body: @escaping Pipeline.Terminal) -> Stage.Next {
        Pipeline.Next(pipeline: Pipeline(stages: [], transport: MockTransport()), from: 0, terminal: body)
    }

    @Test func preconditionStageSendsNothingWhenACheckFails() async throws {
        struct Offline: Error {}
        let mock = MockTransport()
        var request = try request("/x")
        request.preconditions = [RequestPrecondition("online") { _ in throw Offline() }]
        let stage = PreconditionStage(preconditions: [RequestPrecondition("always") { _ in }])
        #expect(stage.isNeeded(for: request, CallContext()))
        let error = await #expect(throws: TrellisError.self) { _ = try await stage.intercept(request, CallContext(), next: sending(to: mock)) }
        guard case .preconditionFailed(let failure) = error else {
            Issue.record("expected preconditionFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.name == "online")
        #expect(mock.requests.isEmpty)
        #expect(!PreconditionStage(preconditions: []).isNeeded(for: try self.request("/x"), CallContext()))
    }

    @Test func validationStageChecksABufferedAcceptedResponse() async throws {
        struct WrongVersion: Error {}
        let mock = MockTransport()
        mock.register(.get, "/x", text: "v1")
        let stage = ValidationStage(
            validations: [ResponseValidation("version 2") { response, _ in
                guard String(decoding: response.body, as: UTF8.self) == "v2" else { throw WrongVersion() }
            }],
            acceptedStatuses: Set(200...299)
        )
        let error = await #expect(throws: TrellisError.self) { _ = try await stage.intercept(try request("/x"), CallContext(), next: sending(to: mock)) }
        guard case .validationFailed(let failure) = error else {
            Issue.record("expected validationFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.status == 200)
        mock.register(.get, "/x", status: .notFound, text: "v1")
        // Not an accepted status: the status check, not the validation, speaks for it.
        let notFound = try await stage.intercept(try request("/x"), CallContext(), next: sending(to: mock))
        #expect(notFound.status == .notFound)
    }

    @Test func retryStageRetriesWithinThePolicyAndAppliesTheRequestsTimeout() async throws {
        let mock = MockTransport()
        let attempts = NIOLockedValueBox(0)
        mock.register(.get, "/x") { _ in
            let attempt = attempts.withLockedValue { $0 += 1; return $0 }
            return Response(head: HTTPResponse(status: attempt < 3 ? .serviceUnavailable : .ok), body: Data())
        }
        let sleeper = RecordingSleeper()
        let stage = RetryStage(policy: sleeper.policy(maximumRetries: 2), context: PolicyContext(clock: sleeper.clock))
        var request = try request("/x")
        request.timeout = .seconds(5)
        let seen = NIOLockedValueBox<[Duration?]>([])
        // Each attempt gets its time limits afresh from the stage after the retries.
        let response = try await stage.intercept(request, CallContext(), next: then { attempt, call in
            try await TimeLimitStage(timeouts: .init()).intercept(attempt, call, next: then { attempt, call in
                seen.withLockedValue { $0.append(call.limits?.timeout) }
                return try await mock.send(attempt, within: call.limitsOfAttempt)
            })
        })
        #expect(response.status == .ok)
        #expect(attempts.withLockedValue { $0 } == 3)
        #expect(sleeper.recorded.count == 2)
        #expect(seen.withLockedValue { $0 } == [.seconds(5), .seconds(5), .seconds(5)])
    }

    @Test func redirectStageSendsEachHopDownAgainWithoutHandSetCredentialsElsewhere() async throws {
        let mock = MockTransport()
        mock.register(.get, "/start", status: .found, headerFields: [.location: "https://other.test/end"])
        mock.register(.get, "/end", text: "done")
        var request = try request("/start")
        request.headerFields[.authorization] = "Bearer by-hand"
        let hops = NIOLockedValueBox<[(url: String, callOrigin: String?)]>([])
        let response = try await RedirectStage(policy: .follow, secretQueryNames: []).intercept(request, CallContext(), next: then { hop, call in
            hops.withLockedValue { $0.append((hop.urlString, call.origin)) }
            return try await mock.send(hop, within: call.limitsOfAttempt)
        })
        #expect(response.status == .ok)
        #expect(hops.withLockedValue { $0.map(\.url) } == ["https://api.test/start", "https://other.test/end"])
        #expect(mock.requests.last?.request.headerFields[.authorization] == nil)
        #expect(hops.withLockedValue { $0.last?.callOrigin } == "https://api.test:443")
    }

    @Test func accessTokenStageAddsTheTokenForItsOriginOnly() async throws {
        let mock = MockTransport()
        mock.register(.get, "/x", text: "ok")
        let settings = AccessTokenSettings()
        try await settings.storage.store(AccessToken(accessToken: "t0ken"), for: "label")
        let client = Client(baseURL: base, transport: mock) { $0.accessTokens = settings }
        let stage = AccessTokenStage(authorizer: client.authorizer, client: {
            let reference = ClientReference()
            reference.client = client
            return reference
        }())
        var own = try request("/x")
        own.accessToken = AccessTokenRequirement(label: "label")
        #expect(stage.isNeeded(for: own, CallContext()))
        _ = try await stage.intercept(own, CallContext(), next: sending(to: mock))
        var foreign = try Request(method: .get, url: URL(string: "https://elsewhere.test/x")!)
        foreign.accessToken = AccessTokenRequirement(label: "label")
        _ = try await stage.intercept(foreign, CallContext(), next: sending(to: mock))
        #expect(mock.requests.map { $0.request.headerFields[.authorization] } == ["Bearer t0ken", nil])
        #expect(!stage.isNeeded(for: try request("/x"), CallContext()))
    }

    @Test func defaultHeadersStageNamesTheBodysType() async throws {
        let mock = MockTransport()
        mock.register(.post, "/x", text: "ok")
        let stage = DefaultHeadersStage(defaultHeaders: [:])
        let text = try request("/x", method: .post, body: RequestBody("hello"))
        #expect(stage.isNeeded(for: text, CallContext()))
        _ = try await stage.intercept(text, CallContext(), next: sending(to: mock))
        #expect(mock.requests.first?.request.headerFields[.contentType] == "text/plain; charset=utf-8")
        #expect(!stage.isNeeded(for: try request("/x"), CallContext()))
        // A type the caller gave is the one sent.
        var typed = try request("/x", method: .post, body: RequestBody("# hello"))
        typed.headerFields[.contentType] = "text/markdown"
        #expect(!stage.isNeeded(for: typed, CallContext()))
    }

    @Test func defaultHeadersStageLeavesTheCallersFields() async throws {
        let mock = MockTransport()
        mock.register(.post, "/x", text: "ok")
        let stage = DefaultHeadersStage(defaultHeaders: [.accept: "application/json", .userAgent: "trellis-test"])
        var own = try request("/x", method: .post, body: RequestBody("hello"))
        own.headerFields[.accept] = "text/html"
        _ = try await stage.intercept(own, CallContext(), next: sending(to: mock))
        let sent = try #require(mock.requests.first?.request.headerFields)
        #expect(sent[values: .accept] == ["text/html"])
        #expect(sent[.userAgent] == "trellis-test")
        #expect(sent[values: .contentType] == ["text/plain; charset=utf-8"])
    }

    @Test func originPolicyStageRefusesPlainHTTPBeforeSending() async throws {
        let mock = MockTransport()
        let stage = OriginPolicyStage(plainHTTP: .refusedExceptLoopback, pinningConflict: nil, transport: mock)
        let plain = try Request(method: .get, url: URL(string: "http://api.test/x")!)
        await #expect(throws: TrellisError.self) { _ = try await stage.intercept(plain, CallContext(), next: sending(to: mock)) }
        let loopback = try Request(method: .get, url: URL(string: "http://127.1/x")!)
        _ = try await stage.intercept(loopback, CallContext(), next: sending(to: mock))
        #expect(mock.requests.count == 1)
    }

    // A broken idle timer would leave the read waiting forever: the limit makes it a failure.
    @Test(.hangGuard) func theIdleTimeoutEndsABodyThatStalls() async throws {
        // The chunk that is already there is handed over however long the pump waits for a
        // thread: the idle time counts from when the pump asks the transport.
        let limits = ExchangeLimits(timeout: .seconds(60), idleTimeout: .seconds(1))
        let (chunks, sink) = AsyncStream.makeStream(of: ByteBuffer.self)
        sink.yield(ByteBuffer(string: "first"))
        let response = limits.watchingIdleTime(
            Response(head: HTTPResponse(status: .ok), body: ResponseBody(stream: chunks, expectedLength: nil)),
            of: try request("/x")
        )
        var iterator = response.body.makeAsyncIterator()
        #expect(try await iterator.next().map { String(buffer: $0) } == "first")
        let error = await #expect(throws: TrellisError.self) { _ = try await iterator.next() }
        guard case .timedOut(let failure) = error else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
        #expect(failure.timeout == .seconds(1))
        sink.finish()
    }

    @Test func theIdleTimeoutLeavesAReaderThatPausesAlone() async throws {
        // The idle timeout counts while the transport is asked for a chunk, not while the
        // reader is busy elsewhere. The pause stands for the reader's own work; the body has
        // nothing to signal.
        let limits = ExchangeLimits(timeout: .seconds(60), idleTimeout: .seconds(2))
        let (chunks, sink) = AsyncStream.makeStream(of: ByteBuffer.self)
        sink.yield(ByteBuffer(string: "first"))
        sink.yield(ByteBuffer(string: "second"))
        sink.finish()
        let response = limits.watchingIdleTime(
            Response(head: HTTPResponse(status: .ok), body: ResponseBody(stream: chunks, expectedLength: nil)),
            of: try request("/x")
        )
        var iterator = response.body.makeAsyncIterator()
        #expect(try await iterator.next().map { String(buffer: $0) } == "first")
        try await Task.sleep(for: .seconds(3))
        #expect(try await iterator.next().map { String(buffer: $0) } == "second")
        #expect(try await iterator.next() == nil)
    }

    @Test func theDeadlineBoundsABufferedBody() async throws {
        let limits = ExchangeLimits(timeout: .milliseconds(100), idleTimeout: .seconds(60), bufferLimit: 1 << 20)
        let request = try request("/x")
        let (chunks, sink) = AsyncStream.makeStream(of: ByteBuffer.self)
        sink.yield(ByteBuffer(string: "part"))
        let error = await #expect(throws: TrellisError.self) {
            _ = try await limits.enforce(for: request) {
                Response(head: HTTPResponse(status: .ok), body: ResponseBody(stream: chunks, expectedLength: nil))
            }
        }
        guard case .timedOut(let failure) = error else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
        #expect(failure.timeout == .milliseconds(100))
        sink.finish()
    }

    @Test func loggingStageLogsEachHopRedacted() async throws {
        let records = LogCapture()
        var logger = Logger(label: "stage") { _ in records }
        logger.logLevel = .debug
        let mock = MockTransport()
        mock.register(.get, "/x", text: "ok")
        var request = try request("/x?token=secret")
        request.headerFields[.authorization] = "Bearer secret"
        _ = try await LoggingStage(logger: logger).intercept(request, CallContext(), next: sending(to: mock))
        let text = records.messages.joined(separator: "\n")
        #expect(text.contains("→ GET https://api.test/x?token=<redacted>"))
        #expect(text.contains("← 200"))
        #expect(!text.contains("secret"))
    }

    /// Records what a middleware does on either side of `next`, in the order it happens.
    private struct RecordingMiddleware: Middleware {
        let name: String
        let events: NIOLockedValueBox<[String]>
        var refuses = false
        var scope: MiddlewareScope { .hop }

        func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            events.withLockedValue { $0.append("prepare \(name)") }
            if refuses { throw TrellisError.invalidRequest(InvalidRequest(.url, "refused by \(name)")) }
            var request = request
            request.headerFields.append(HTTPField(name: .init("X-Prepared")!, value: name))
            let response = try await next(request)
            // What it sent: its own field and those of the middlewares before it.
            let prepared = request.headerFields[values: .init("X-Prepared")!].joined(separator: ",")
            events.withLockedValue { $0.append("finish \(name) (sent with \(prepared))") }
            return response
        }
    }

    private struct RecordingStage: Middleware {
        let events: NIOLockedValueBox<[String]>
        var scope: MiddlewareScope { .hop }

        func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            events.withLockedValue { $0.append("enter") }
            defer { events.withLockedValue { $0.append("leave") } }
            return try await next(request)
        }
    }

    @Test func middlewaresRunInOrderOutwardAndUnwindInReverse() async throws {
        let events = NIOLockedValueBox<[String]>([])
        let mock = MockTransport()
        mock.register(.get, "/x", text: "ok")
        let client = Client(baseURL: base, transport: mock, middlewares: [
            RecordingMiddleware(name: "a", events: events),
            RecordingMiddleware(name: "b", events: events),
            RecordingStage(events: events),
            RecordingMiddleware(name: "c", events: events),
        ]) { $0.cookies = nil }
        _ = try await client.data(for: try request("/x"))
        #expect(events.withLockedValue { $0 } == [
            "prepare a", "prepare b", "enter", "prepare c",
            "finish c (sent with a,b,c)", "leave",
            "finish b (sent with a,b)", "finish a (sent with a)",
        ])
        #expect(mock.requests.first?.request.headerFields[values: .init("X-Prepared")!] == ["a", "b", "c"])

        // A refusal ends the hop where it happens: nothing is sent, nothing is finished.
        events.withLockedValue { $0 = [] }
        let refusing = Client(baseURL: base, transport: mock, middlewares: [
            RecordingMiddleware(name: "a", events: events),
            RecordingMiddleware(name: "b", events: events, refuses: true),
        ])
        await #expect(throws: TrellisError.self) { _ = try await refusing.data(for: try request("/x")) }
        #expect(events.withLockedValue { $0 } == ["prepare a", "prepare b"])
        #expect(mock.requests.count == 1)
    }
}
