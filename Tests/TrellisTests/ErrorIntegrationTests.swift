import Foundation
import Testing
import Trellis

@Suite("Errors, cancellation and timeouts against a real server")
struct ErrorIntegrationTests {
    private func withProbe(_ kind: TransportKind, timeout: Duration = .seconds(30), _ body: (ProbeService) async throws -> Void) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            try await body(ProbeService(client: Client(baseURL: url, transport: kind.transport) { $0.timeouts.request = timeout }))
        }
    }

    private func statusFailure(_ error: (any Error)?) -> HTTPStatusFailure? {
        if case .unacceptableStatus(let failure) = error as? TrellisError { return failure }
        Issue.record("expected unacceptableStatus, got \(String(describing: error))")
        return nil
    }

    @Test(arguments: TransportKind.allCases)
    func statusErrorsCarryStatusHeadersAndBody(_ kind: TransportKind) async throws {
        try await withProbe(kind) { probe in
            let error = await #expect(throws: TrellisError.self) { try await probe.status(code: 503) }
            #expect(statusFailure(error)?.status == .serviceUnavailable)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func problemDetailsAreDecoded(_ kind: TransportKind) async throws {
        try await withProbe(kind) { probe in
            let error = await #expect(throws: TrellisError.self) { try await probe.problem() }
            let failure = statusFailure(error)
            #expect(failure?.status.code == 422)
            #expect(failure?.problem == ProblemDetails(type: "https://example.com/out-of-stock", title: "Out of stock", status: 422, detail: "Item 7 is sold out"))
            #expect(failure?.description.contains("Out of stock") == true)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func richErrorBodiesAreDecoded(_ kind: TransportKind) async throws {
        try await withProbe(kind) { probe in
            let error = await #expect(throws: TrellisError.self) { try await probe.rich() }
            let failure = statusFailure(error)
            #expect(failure?.richError == RichErrorBody(error: "Invalid coupon", domainCode: 4021))
            struct ServerError: Decodable { var error: String }
            let decoded = try failure?.decodeBody(as: ServerError.self)
            #expect(decoded?.error == "Invalid coupon")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func unauthorizedWithChallengeReachesTheCaller(_ kind: TransportKind) async throws {
        try await withProbe(kind) { probe in
            let error = await #expect(throws: TrellisError.self) { try await probe.unauthorized() }
            #expect(statusFailure(error)?.status == .unauthorized)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func nonJSONBodyIsADecodingErrorWithAnExcerpt(_ kind: TransportKind) async throws {
        try await withProbe(kind) { probe in
            let error = await #expect(throws: TrellisError.self) { try await probe.html() }
            guard case .decodingFailed(let failure) = error else {
                Issue.record("expected decodingFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.status == .ok)
            #expect(failure.bodyExcerpt.contains("Not JSON"))
            #expect(failure.type.hasSuffix("Post"))

            let empty = await #expect(throws: TrellisError.self) { try await probe.empty() }
            guard case .decodingFailed(let emptyFailure) = empty else {
                Issue.record("expected decodingFailed, got \(String(describing: empty))")
                return
            }
            #expect(emptyFailure.status == .noContent)
            #expect(emptyFailure.reason == "the body is empty")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func decodingErrorsNameTheCodingPath(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            struct Strict: Decodable { var id: Int; var title: Int }
            var builder = _RequestBuilder(method: .get, path: "/posts")
            builder.timeout = .seconds(30)
            let error = await #expect(throws: TrellisError.self) {
                try await client.value(for: builder.makeRequest(for: client), as: [Strict].self)
            }
            guard case .decodingFailed(let failure) = error else {
                Issue.record("expected decodingFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.codingPath == "[0].title")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func connectionRefusedIsAConnectionFailure(_ kind: TransportKind) async throws {
        let refusing = try RefusingPort()
        let url = refusing.url
        let probe = ProbeService(client: Client(baseURL: url, transport: kind.transport) { $0.timeouts.request = .seconds(30) })
        let error = await #expect(throws: TrellisError.self) { try await probe.text() }
        guard case .connectionFailed(let failure) = error else {
            Issue.record("expected connectionFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.host.hasPrefix("127.0.0.1"))
        withExtendedLifetime(refusing) {}
    }

    @Test(arguments: TransportKind.allCases)
    func relativeBaseURLIsRejectedBeforeSending(_ kind: TransportKind) async throws {
        let mock = CountingTransport()
        let probe = ProbeService(client: Client(baseURL: URL(string: "api/v1")!, transport: mock))
        let error = await #expect(throws: TrellisError.self) { try await probe.text() }
        guard case .invalidRequest(let invalid) = error else {
            Issue.record("expected invalidRequest, got \(String(describing: error))")
            return
        }
        #expect(invalid.part == .url)
        #expect(invalid.reason.contains("api/v1"))
        #expect(mock.count == 0)
    }

    @Test(.hangGuard, arguments: TransportKind.allCases)
    func cancellingTheTaskClosesTheConnection(_ kind: TransportKind) async throws {
        let silent = try await SilentServer()
        let probe = ProbeService(client: Client(baseURL: silent.url, transport: kind.transport) { $0.timeouts.request = .seconds(600) })
        let call = Task { try await probe.text() }
        var events = silent.events.makeAsyncIterator()
        #expect(await events.next() == .requestReceived)
        call.cancel()
        let result = await call.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(await events.next() == .connectionClosed)
        try await silent.stop()
    }

    @Test(.hangGuard, arguments: TransportKind.allCases)
    func timeoutsEndTheRequest(_ kind: TransportKind) async throws {
        let silent = try await SilentServer()
        // Long enough for the request to leave even when the whole suite runs in parallel on
        // two cores (FoundationNetworking once took over 300 ms to send its first request),
        // since the test then checks that the server saw the request and the connection close.
        let probe = ProbeService(client: Client(baseURL: silent.url, transport: kind.transport) { $0.timeouts.request = .seconds(2) })
        let error = await #expect(throws: TrellisError.self) { try await probe.text() }
        guard case .timedOut(let failure) = error else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
        #expect(failure.timeout == .seconds(2))
        var events = silent.events.makeAsyncIterator()
        #expect(await events.next() == .requestReceived)
        #expect(await events.next() == .connectionClosed)
        try await silent.stop()
    }

    @Test(.hangGuard, arguments: TransportKind.allCases)
    func aBodyThatStallsAfterTheHeadTimesOut(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts.request = .milliseconds(300) }
            let error = await #expect(throws: TrellisError.self) {
                try await client.data(for: Request(method: .get, url: url.appending(path: "stall")))
            }
            guard case .timedOut(let failure) = error else {
                Issue.record("expected timedOut, got \(String(describing: error))")
                return
            }
            #expect(failure.timeout == .milliseconds(300))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func bodiesOverTheLimitFailBeforeTheyAreHeld(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.limits.maximumBodySize = 100_000 }
            let fits = try await client.data(for: Request(method: .get, url: url.appending(path: "chunked/100000")))
            #expect(fits.body.count == 100_000)
            let error = await #expect(throws: TrellisError.self) {
                try await client.data(for: Request(method: .get, url: url.appending(path: "chunked/100001")))
            }
            guard case .responseTooLarge(let tooLarge) = error else {
                Issue.record("expected responseTooLarge, got \(String(describing: error))")
                return
            }
            #expect(tooLarge.limit == 100_000)
        }
    }

    @Test(.hangGuard, arguments: TransportKind.allCases)
    func perRequestTimeoutOverridesTheClients(_ kind: TransportKind) async throws {
        let silent = try await SilentServer()
        let client = Client(baseURL: silent.url, transport: kind.transport) { $0.timeouts.request = .seconds(600) }
        var builder = _RequestBuilder(method: .get, path: "/slow")
        builder.timeout = .milliseconds(200)
        let error = await #expect(throws: TrellisError.self) { try await client.perform(builder.makeRequest(for: client)) }
        guard case .timedOut(let failure) = error else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
        #expect(failure.timeout == .milliseconds(200))
        try await silent.stop()
    }
}

/// Counts what reaches the transport, to prove that nothing did.
final class CountingTransport: Transport, @unchecked Sendable {
    private let lock = NSLock()
    private var sent = 0

    var count: Int { lock.withLock { sent } }

    func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        lock.withLock { sent += 1 }
        return Response(head: .init(status: .ok), body: ResponseBody())
    }
}
