import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import Trellis

/// One classifier on the client, and every resilience policy follows it: each test makes a
/// `409` a failure for the whole client, against a real in-process server, and checks one
/// policy, with the same client without the classifier (today's rule) beside it, and a
/// policy's own classifier overriding the client's.
@Suite("One failure classifier, every policy", .hangGuard)
struct FailureClassifierTests {
    /// The rule these tests set on the client: what retries count by default, and a `409` too.
    static let conflicts = FailureClassifier.transientFailures.or(.statuses([409]))

    @Test(arguments: TransportKind.allCases)
    func retriesFollowTheClientsClassifierUnlessTheirOwnIsSet(_ kind: TransportKind) async throws {
        let seen = NIOLockedValueBox<[String: Int]>([:])
        try await ScriptedServer.with({ received in
            // Each path: a 409 first, then a 200.
            let count = seen.withLockedValue { seen in
                seen[received.target, default: 0] += 1
                return seen[received.target]!
            }
            return count == 1 ? ScriptedServer.response("409 Conflict") : ScriptedServer.response("200 OK", body: "ok")
        }) { server in
            func sent(to path: String, retry: RetryPolicy, classifier: FailureClassifier?) async -> Int {
                let client = Client(baseURL: server.url, transport: kind.transport) {
                    $0.retryWithoutWaiting(retry)
                    $0.resilience.failureClassifier = classifier
                }
                _ = try? await client.data(for: Request(method: .get, url: server.url.appending(path: path)))
                return server.requests.filter { $0.target == "/\(path)" }.count
            }
            let retry = RetryPolicy(maximumRetries: 2)
            #expect(await sent(to: "classified", retry: retry, classifier: Self.conflicts) == 2)
            #expect(await sent(to: "default", retry: retry, classifier: nil) == 1)
            var own = retry
            own.failureClassifier = .transientFailures
            #expect(await sent(to: "overridden", retry: own, classifier: Self.conflicts) == 1)
        }
    }

    /// The budget takes a token for each 409 the client's classifier counts, even though the
    /// retry policy's own classifier does not retry them: after two, a 503 is not retried.
    @Test func theRetryBudgetFollowsTheClientsClassifier() async throws {
        try await ScriptedServer.with({ received in
            received.target == "/conflict" ? ScriptedServer.response("409 Conflict") : ScriptedServer.response("503 Service Unavailable")
        }) { server in
            func sentForAFailingCall(classifier: FailureClassifier?) async throws -> (sent: Int, events: [String]) {
                let events = RecordedResilienceEvents()
                let client = Client(baseURL: server.url) {
                    $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 1, failureClassifier: .transientFailures))
                    $0.resilience.retryBudget = RetryBudget(maximumTokens: 4)
                    $0.resilience.failureClassifier = classifier
                    $0.observability.eventMonitors = [events]
                }
                for _ in 0..<2 { _ = try? await client.data(for: Request(method: .get, url: server.url.appending(path: "conflict"))) }
                let before = server.requests.count
                _ = try? await client.data(for: Request(method: .get, url: server.url.appending(path: "down")))
                return (server.requests.count - before, events.names)
            }
            let classified = try await sentForAFailingCall(classifier: Self.conflicts)
            #expect(classified.sent == 1)
            #expect(classified.events == ["retry_refused_by_budget"])
            let unclassified = try await sentForAFailingCall(classifier: nil)
            #expect(unclassified.sent == 2)
            #expect(unclassified.events.isEmpty)
        }
    }

    @Test func theCircuitBreakerFollowsTheClientsClassifierUnlessItsOwnIsSet() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("409 Conflict") }) { server in
            func thirdCallRefused(classifier: FailureClassifier?, breakersOwn: FailureClassifier? = nil) async throws -> Bool {
                let client = Client(baseURL: server.url) {
                    $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(2), failureClassifier: breakersOwn)
                    $0.resilience.failureClassifier = classifier
                }
                let request = try Request(method: .get, url: server.url)
                for _ in 0..<2 { _ = try? await client.data(for: request) }
                let before = server.requests.count
                do {
                    _ = try await client.data(for: request)
                } catch TrellisError.callRefused(let refusal) {
                    #expect(refusal.reason == .circuitOpen)
                    #expect(server.requests.count == before)
                    return true
                } catch {}
                return false
            }
            let classified = try await thirdCallRefused(classifier: Self.conflicts)
            let unclassified = try await thirdCallRefused(classifier: nil)
            let overridden = try await thirdCallRefused(classifier: Self.conflicts, breakersOwn: .serverFailures)
            #expect(classified)
            #expect(!unclassified)
            #expect(!overridden)
        }
    }

    /// A 409 that asks to wait pauses every call once the classifier counts it.
    @Test func theSharedPauseFollowsTheClientsClassifier() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("409 Conflict", ["Retry-After: 3600"]) }) { server in
            func secondCallRefused(classifier: FailureClassifier?) async throws -> Bool {
                let client = Client(baseURL: server.url) {
                    $0.resilience.sharedBackoff = SharedBackoff(maximumWait: .seconds(5))
                    $0.resilience.failureClassifier = classifier
                }
                let request = try Request(method: .get, url: server.url)
                _ = try? await client.data(for: request)
                do {
                    _ = try await client.data(for: request)
                } catch TrellisError.callRefused(let refusal) {
                    #expect(refusal.reason == .rateLimited)
                    return true
                } catch {}
                return false
            }
            let classified = try await secondCallRefused(classifier: Self.conflicts)
            let unclassified = try await secondCallRefused(classifier: nil)
            #expect(classified)
            #expect(!unclassified)
        }
    }

    /// The first attempt's 409 comes back while the hedge is out: it does not win, and the call
    /// gets the hedge's answer. The test lets the hedge answer only once the 409 has been read.
    @Test func aHedgedAnswerTheClassifierCountsDoesNotWinWhileAnotherAttemptIsOut() async throws {
        try await ScriptedServer.with({ received in
            received.field("X-Attempt") == nil
                ? ScriptedServer.held(ScriptedServer.response("409 Conflict", body: "first"))
                : ScriptedServer.held(ScriptedServer.response("200 OK", body: "hedge"))
        }) { server in
            let attempts = AttemptStatuses()
            let client = Client(baseURL: server.url, middlewares: [attempts]) {
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(20)))
                $0.resilience.failureClassifier = .statuses([409])
            }
            var arrivals = server.arrivals.makeAsyncIterator()
            var statuses = attempts.statuses.makeAsyncIterator()
            let call = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "slow"))).body }
            _ = await arrivals.next()
            _ = await arrivals.next()
            // By answer, not by arrival: the hedge's request can reach the server first (under
            // ThreadSanitizer beside busy loops, the answer released first was not the 409).
            server.releaseOldestHeld(containing: "409 Conflict")
            #expect(await statuses.next() == 409)
            server.releaseHeld()
            let body = try await call.value
            #expect(String(decoding: body, as: UTF8.self) == "hedge")
        }
    }

    /// The order of a race's ends when answers can lose, each chosen by the test.
    @Test func aHedgedCallWhoseAttemptsAllFailEndsAsItsFirstAttemptDid() async throws {
        let get = try {
            var request = try Request(method: .get, url: URL(string: "http://gated.test/items")!)
            request.acceptedStatuses = [200, 409, 503]
            return request
        }()
        func race(_ ends: (GatedTransport) async throws -> Void) async throws -> (status: Int, body: String)? {
            let transport = GatedTransport()
            let client = Client(baseURL: URL(string: "http://gated.test")!, transport: transport) {
                $0.retry = .none
                $0.resilience.hedging = Hedging(after: .fixed(.zero))
                $0.resilience.failureClassifier = .statuses([409, 503])
            }
            let call = Task { try await client.data(for: get) }
            var started = transport.started.makeAsyncIterator()
            _ = await started.next()
            _ = await started.next()
            try await ends(transport)
            guard let response = try? await call.value else { return nil }
            return (response.status.code, String(decoding: response.body, as: UTF8.self))
        }
        let refusal = TrellisError.connectionFailed(ConnectionFailure(host: "hedge", reason: "refused"))

        // Both answer with failures, in either order: the first attempt's answer.
        let hedgeFirst = try await race { $0.end(2, with: .success("hedge"), status: .serviceUnavailable); $0.end(1, with: .success("first"), status: .conflict) }
        #expect(hedgeFirst?.status == 409 && hedgeFirst?.body == "first")
        let firstFirst = try await race { $0.end(1, with: .success("first"), status: .conflict); $0.end(2, with: .success("hedge"), status: .serviceUnavailable) }
        #expect(firstFirst?.status == 409 && firstFirst?.body == "first")
        // The first answers with a failure, the hedge breaks: the first's answer.
        let hedgeBreaks = try await race { $0.end(1, with: .success("first"), status: .conflict); $0.end(2, with: .failure(refusal)) }
        #expect(hedgeBreaks?.status == 409)
        // The hedge's failed answer does not win over the first attempt's good one.
        let firstAnswers = try await race { $0.end(2, with: .success("hedge"), status: .serviceUnavailable); $0.end(1, with: .success("first")) }
        #expect(firstAnswers?.status == 200 && firstAnswers?.body == "first")
    }

    /// The built-in rules, outcome by outcome.
    @Test func theBuiltInRulesCountBrokenAttemptsAndTheirStatuses() {
        let broken = AttemptOutcome.failed(.connectionFailed(ConnectionFailure(host: "a", reason: "refused")), wasSent: true)
        var violation = ConnectionFailure(host: "a", reason: "not HTTP")
        violation.isProtocolViolation = true
        let notHTTP = AttemptOutcome.failed(.connectionFailed(violation), wasSent: true)
        let proxyChallenge = AttemptOutcome.failed(
            .connectionFailed(ConnectionFailure(host: "a", reason: "407", underlying: ProxyTunnelHandler.Refused(status: 407))), wasSent: true
        )
        let timedOut = AttemptOutcome.failed(.timedOut(TimeoutFailure(timeout: .seconds(1), request: "GET /")), wasSent: true)
        let tls = AttemptOutcome.failed(.tlsFailed(ConnectionFailure(host: "a", reason: "bad certificate")), wasSent: true)
        let answered = { (code: Int) in AttemptOutcome.answered(HTTPResponse(status: .init(code: code))) }

        let transient = FailureClassifier.transientFailures
        #expect([broken, timedOut, answered(408), answered(429), answered(503)].allSatisfy(transient.isFailure))
        #expect(![notHTTP, proxyChallenge, tls, answered(200), answered(409)].contains(where: transient.isFailure))
        let server = FailureClassifier.serverFailures
        #expect([broken, notHTTP, timedOut, answered(500), answered(504)].allSatisfy(server.isFailure))
        #expect(![proxyChallenge, tls, answered(408), answered(429)].contains(where: server.isFailure))
        #expect(Self.conflicts.isFailure(answered(409)) && Self.conflicts.isFailure(broken))
    }
}

/// Marks every attempt after the first (`X-Attempt`), so the server can tell a hedge from the
/// original, and yields the status of each answer as it comes back up the hop.
private final class AttemptStatuses: Middleware {
    private let first = NIOLockedValueBox(true)
    let statuses: AsyncStream<Int>
    private let sink: AsyncStream<Int>.Continuation
    var scope: MiddlewareScope { .hop }

    init() {
        (statuses, sink) = AsyncStream.makeStream()
    }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        var request = request
        if !first.withLockedValue({ isFirst in defer { isFirst = false }; return isFirst }) {
            request.headerFields[HTTPField.Name("X-Attempt")!] = "later"
        }
        let response = try await next(request)
        sink.yield(response.status.code)
        return response
    }
}
