import Foundation
import HTTPTypes
import NIOCore
import Testing
import Trellis
import TrellisTesting

@Service
protocol Flaky {
    @GET("/flaky/{key}")
    @Retry(maximumRetries: 3)
    func fetch(key: String, status: Int, failures: Int) async throws -> Attempt

    @POST("/flaky/{key}")
    func submit(key: String, status: Int, failures: Int) async throws -> Attempt

    @POST("/flaky/{key}")
    @Retry(maximumRetries: 2, retriesNonIdempotentMethods: true)
    func submitSafely(key: String, status: Int, failures: Int) async throws -> Attempt
}

@Suite("Retries, preconditions and validations")
struct RetryIntegrationTests {
    private func withFlaky(_ body: (URL, FlakyRoutes) async throws -> Void) async throws {
        let flaky = FlakyRoutes()
        try await TestServer.with({ router in
            TestRoutes.install(router)
            flaky.install(router)
        }) { url in try await body(url, flaky) }
    }

    private func flaky(_ url: URL, _ key: String, status: Int = 503, failures: Int, retryAfter: String? = nil) -> URL {
        var components = URLComponents(url: url.appending(path: "flaky/\(key)"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "status", value: "\(status)"), URLQueryItem(name: "failures", value: "\(failures)")]
            + (retryAfter.map { [URLQueryItem(name: "retryAfter", value: $0)] } ?? [])
        return components.url!
    }

    @Test(arguments: TransportKind.allCases)
    func retryAfterInSecondsIsWaitedAndTheThirdAttemptSucceeds(_ kind: TransportKind) async throws {
        try await withFlaky { url, server in
            let sleeper = RecordingSleeper()
            let client = Client(baseURL: url, transport: kind.transport) { sleeper.retry(&$0) }
            let attempt = try await client.value(for: Request(method: .get, url: flaky(url, "a", failures: 2, retryAfter: "3")), as: Attempt.self)
            #expect(attempt.attempt == 3)
            #expect(server.attempts(for: "a") == 3)
            #expect(sleeper.recorded == [.seconds(3), .seconds(3)])
        }
    }

    @Test func retryAfterAsAnHTTPDateIsWaitedUntilThatDate() async throws {
        try await withFlaky { url, server in
            // The server's date is 08:49:37; the client's clock says 08:49:30.
            let now = try #require(ISO8601DateFormatter().date(from: "1994-11-06T08:49:30Z"))
            let sleeper = RecordingSleeper(startingAt: now)
            let client = Client(baseURL: url) { sleeper.retry(&$0) }
            let request = try Request(method: .get, url: flaky(url, "date", status: 429, failures: 1, retryAfter: "Sun, 06 Nov 1994 08:49:37 GMT"))
            let attempt = try await client.value(for: request, as: Attempt.self)
            #expect(attempt.attempt == 2)
            #expect(sleeper.recorded == [.seconds(7)])
        }
    }

    @Test func withoutRetryAfterTheWaitsGrowExponentiallyWithJitter() async throws {
        try await withFlaky { url, _ in
            let sleeper = RecordingSleeper()
            let policy = sleeper.policy(maximumRetries: 4) { policy in
                policy.initialDelay = .milliseconds(100)
                policy.maximumDelay = .milliseconds(500)
            }
            let client = Client(baseURL: url) {
                $0.retry = policy
                $0.clock = sleeper.clock
            }
            _ = try await client.value(for: Request(method: .get, url: flaky(url, "b", status: 500, failures: 4)), as: Attempt.self)
            // 100, 200, 400, then 800 capped at 500 ms; the injected random number halves the
            // jitter share (0.5) of each.
            #expect(sleeper.recorded == [.milliseconds(75), .milliseconds(150), .milliseconds(300), .milliseconds(375)])
        }
    }

    @Test func aRetryAfterBeyondTheCapEndsTheRetriesAndReturnsTheStatus() async throws {
        try await withFlaky { url, server in
            let sleeper = RecordingSleeper()
            let client = Client(baseURL: url) { sleeper.retry(&$0) { $0.maximumDelay = .seconds(10) } }
            let error = await #expect(throws: TrellisError.self) {
                try await client.perform(Request(method: .get, url: flaky(url, "c", failures: 1, retryAfter: "3600")))
            }
            guard case .unacceptableStatus(let failure) = error else {
                Issue.record("expected unacceptableStatus, got \(String(describing: error))")
                return
            }
            #expect(failure.status.code == 503)
            #expect(failure.headerFields[.retryAfter] == "3600")
            #expect(server.attempts(for: "c") == 1)
            #expect(sleeper.recorded.isEmpty)
        }
    }

    @Test func theTotalCapStopsRetryingBeforeItIsExceeded() async throws {
        try await withFlaky { url, server in
            let sleeper = RecordingSleeper()
            let client = Client(baseURL: url) { sleeper.retry(&$0, maximumRetries: 5) { $0.maximumTotalDelay = .seconds(5) } }
            await #expect(throws: TrellisError.self) {
                try await client.perform(Request(method: .get, url: flaky(url, "d", failures: 10, retryAfter: "2")))
            }
            #expect(sleeper.recorded == [.seconds(2), .seconds(2)])
            #expect(server.attempts(for: "d") == 3)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func postIsNotRetriedUnlessTheEndpointOptsIn(_ kind: TransportKind) async throws {
        try await withFlaky { url, server in
            let sleeper = RecordingSleeper()
            let service = FlakyService(client: Client(baseURL: url, transport: kind.transport) { sleeper.retry(&$0) })
            await #expect(throws: TrellisError.self) { try await service.submit(key: "post", status: 503, failures: 1) }
            #expect(server.attempts(for: "post") == 1)
            let attempt = try await service.submitSafely(key: "safe", status: 503, failures: 2)
            #expect(attempt.attempt == 3)
            #expect(sleeper.recorded.count == 2)
        }
    }

    @Test func retryOnAnEndpointUsesTheClientsWaits() async throws {
        try await withFlaky { url, server in
            let sleeper = RecordingSleeper()
            // The client retries nothing; the endpoint's @Retry(maximumRetries: 3) does, with the client's clock.
            let service = FlakyService(client: Client(baseURL: url) { sleeper.retry(&$0, maximumRetries: 0) })
            let attempt = try await service.fetch(key: "e", status: 502, failures: 3)
            #expect(attempt.attempt == 4)
            #expect(server.attempts(for: "e") == 4)
            #expect(sleeper.recorded.count == 3)
        }
    }

    @Test func aOneShotStreamBodyIsNeverReplayed() async throws {
        try await withFlaky { url, server in
            let sleeper = RecordingSleeper()
            let client = Client(baseURL: url) { sleeper.retry(&$0) }
            let chunks = AsyncStream<ByteBuffer> { continuation in
                continuation.yield(ByteBuffer(string: "once"))
                continuation.finish()
            }
            let request = try Request(method: .put, url: flaky(url, "stream", failures: 1), body: RequestBody(stream: chunks, length: 4))
            await #expect(throws: TrellisError.self) { try await client.perform(request) }
            #expect(server.attempts(for: "stream") == 1)
            // A data body of the same request is replayed.
            let replayable = try Request(method: .put, url: flaky(url, "data", failures: 1), body: RequestBody("again"))
            try await client.perform(replayable)
            #expect(server.attempts(for: "data") == 2)
        }
    }

    @Test(.hangGuard)
    func cancellingTheCallEndsTheWaitAtOnce() async throws {
        try await withFlaky { url, server in
            let clock = ManualClock()
            let client = Client(baseURL: url) {
                $0.retry = RetryPolicy(maximumRetries: 2)
                $0.clock = clock
            }
            let request = try Request(method: .get, url: flaky(url, "f", failures: 5, retryAfter: "30"))
            let call = Task { try await client.perform(request) }
            await clock.sleepers(reaching: 1)
            call.cancel()
            let outcome = await call.result
            guard case .failure(let error) = outcome, error is CancellationError else {
                Issue.record("expected CancellationError, got \(outcome)")
                return
            }
            #expect(server.attempts(for: "f") == 1)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aFailingPreconditionSendsNothing(_ kind: TransportKind) async throws {
        try await withFlaky { url, server in
            struct Offline: Error {}
            let client = Client(baseURL: url, transport: kind.transport) { $0.validation.preconditions = [RequestPrecondition("online") { _ in throw Offline() }] }
            let error = await #expect(throws: TrellisError.self) {
                try await client.perform(Request(method: .get, url: flaky(url, "g", failures: 0)))
            }
            guard case .preconditionFailed(let failure) = error else {
                Issue.record("expected preconditionFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.name == "online")
            #expect(failure.underlying is Offline)
            #expect(server.attempts(for: "g") == 0)

            // Per request, after the client's.
            var request = try Request(method: .get, url: flaky(url, "h", failures: 0))
            request.preconditions = [RequestPrecondition("has a trace header") { request in
                guard request.headerFields[HTTPField.Name("X-Trace")!] != nil else { throw Offline() }
            }]
            let plain = Client(baseURL: url, transport: kind.transport)
            await #expect(throws: TrellisError.self) { try await plain.perform(request) }
            #expect(server.attempts(for: "h") == 0)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aFailingValidationBecomesTheCallsError(_ kind: TransportKind) async throws {
        try await withFlaky { url, _ in
            struct UnexpectedAttempt: Error {}
            let validation = ResponseValidation("first attempt only") { response, _ in
                guard String(decoding: response.body, as: UTF8.self).contains("\"attempt\": 1") else { throw UnexpectedAttempt() }
            }
            let client = Client(baseURL: url, transport: kind.transport) { $0.validation.validations = [validation] }
            let first = try await client.value(for: Request(method: .get, url: flaky(url, "v", failures: 0)), as: Attempt.self)
            #expect(first.attempt == 1)
            let error = await #expect(throws: TrellisError.self) {
                try await client.value(for: Request(method: .get, url: flaky(url, "v", failures: 0)), as: Attempt.self)
            }
            guard case .validationFailed(let failure) = error else {
                Issue.record("expected validationFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.name == "first attempt only")
            #expect(failure.status == 200)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func acceptedStatusesCanBeWidenedPerClientAndPerRequest(_ kind: TransportKind) async throws {
        try await withFlaky { url, _ in
            let strict = Client(baseURL: url, transport: kind.transport)
            let notModified = try Request(method: .get, url: url.appending(path: "status/304"))
            await #expect(throws: TrellisError.self) { try await strict.perform(notModified) }

            let lenient = Client(baseURL: url, transport: kind.transport) { $0.validation.acceptedStatuses = Set(200...299).union([304]) }
            let response = try await lenient.response(for: notModified)
            #expect(response.status.code == 304)

            var accepting = notModified
            accepting.acceptedStatuses = [304]
            try await strict.perform(accepting)
        }
    }
}
