import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
@testable import Trellis
import TrellisTesting

/// The pairs of features that decide on the same part of a call ("The pipeline" article's
/// matrix), against real in-process servers: what adds to a request against what shares
/// across calls, and what sends again against what else does.
@Suite("Where two features meet", .hangGuard)
struct FeaturePairTests {
    /// A task-local a caller's middleware reads, as a tenant or a request ID would be.
    @TaskLocal static var tenant = "none"

    /// Adds `X-Tenant` from the caller's task, in the scope it is given.
    struct TenantHeader: Middleware {
        let scope: MiddlewareScope

        func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            var request = request
            request.headerFields[HTTPField.Name("X-Tenant")!] = FeaturePairTests.tenant
            return try await next(request)
        }
    }

    /// Each way a caller's request can come to differ from another's after the coalescing key
    /// used to be made: each pair of callers sends the same `GET` through clients derived from
    /// one with coalescing on, and each must get the answer to its own request.
    enum Difference: String, CaseIterable, CustomTestStringConvertible {
        case basicAuthentication, apiKeyHeader, apiKeyQuery, hopMiddleware, callMiddleware, interceptor

        var testDescription: String { rawValue }

        /// The client `user` calls through, derived from `base`.
        func client(for user: String, from base: Client) throws -> Client {
            switch self {
            case .basicAuthentication: base.adding(middlewares: [BasicAuthentication(username: user, password: "pw-\(user)")])
            case .apiKeyHeader: base.adding(middlewares: [try APIKey(.header("X-Key"), "key-\(user)")])
            case .apiKeyQuery: base.adding(middlewares: [try APIKey(.query("key"), "key-\(user)")])
            case .hopMiddleware: base.adding(middlewares: [TenantHeader(scope: .hop)])
            case .callMiddleware: base.adding(middlewares: [TenantHeader(scope: .call)])
            case .interceptor:
                base.adding(middlewares: [InterceptorMiddleware(beforeSending: { request in
                    var request = request
                    request.headerFields[HTTPField.Name("X-Tenant")!] = user
                    return request
                }, onResponse: nil, maximumBodySize: 1 << 20)])
            }
        }
    }

    /// What the scripted server answers: who it thinks asked.
    private static func whoAsked(_ received: ScriptedServer.Received) -> String {
        let who = received.field("Authorization") ?? received.field("X-Key") ?? received.field("X-Tenant") ?? received.target
        return ScriptedServer.held(ScriptedServer.response("200 OK", body: who))
    }

    @Test(arguments: TransportKind.allCases, Difference.allCases)
    func coalescingNeverHandsOneCallersAnswerToAnother(_ kind: TransportKind, _ difference: Difference) async throws {
        try await ScriptedServer.with(Self.whoAsked) { server in
            let events = RecordedResilienceEvents()
            let base = Client(baseURL: server.url, transport: kind.transport) {
                $0.resilience.coalescing = Coalescing()
                $0.observability.eventMonitors = [events]
            }
            let alice = try difference.client(for: "alice", from: base)
            let bob = try difference.client(for: "bob", from: base)
            let request = try Request(method: .get, url: server.url.appending(path: "me"))
            let first = Task { try await Self.$tenant.withValue("alice") { try await alice.data(for: request).body } }
            var arrivals = server.arrivals.makeAsyncIterator()
            _ = await arrivals.next()
            let second = Task { try await Self.$tenant.withValue("bob") { try await bob.data(for: request).body } }
            // Bob's call either sends its own request or joins Alice's: whichever comes first.
            let joined = await Self.joinsRatherThanArrives(events, server)
            server.releaseHeld()
            let answers = [String(decoding: try await first.value, as: UTF8.self), String(decoding: try await second.value, as: UTF8.self)]
            #expect(!joined, "bob's call joined alice's")
            #expect(server.requests.count == 2)
            #expect(answers[0] != answers[1], "\(answers)")
            #expect(answers[0].contains("alice") || answers[0].contains(Data("alice:pw-alice".utf8).base64EncodedString()), "\(answers)")
        }
    }

    /// Clients derived from one share its HTTP cache: a response to one caller's credentials
    /// (Basic, an API key in a header or in the query) is not served to another's, unless the
    /// server says it may be (`public`); a field of the caller's own keeps answers apart when the
    /// server varies on it, as HTTP has it.
    @Test(arguments: TransportKind.allCases, Difference.allCases)
    func theCacheNeverServesOneCallersAnswerToAnother(_ kind: TransportKind, _ difference: Difference) async throws {
        try await ScriptedServer.with({ received in
            let who = received.field("Authorization") ?? received.field("X-Key") ?? received.field("X-Tenant") ?? received.target
            return ScriptedServer.response("200 OK", ["Cache-Control: max-age=600", "Vary: X-Tenant"], body: who)
        }) { server in
            let base = Client(baseURL: server.url, transport: kind.transport) { $0.useFrozenCache() }
            let alice = try difference.client(for: "alice", from: base)
            let bob = try difference.client(for: "bob", from: base)
            let request = try Request(method: .get, url: server.url.appending(path: "me"))
            let answers = [
                String(decoding: try await Self.$tenant.withValue("alice") { try await alice.data(for: request).body }, as: UTF8.self),
                String(decoding: try await Self.$tenant.withValue("bob") { try await bob.data(for: request).body }, as: UTF8.self),
            ]
            #expect(answers[0] != answers[1], "\(answers)")
            #expect(server.requests.count == 2)
        }
    }

    /// Access tokens of two labels from one storage: calls with different tokens neither share
    /// an exchange in flight nor each other's cached answers.
    @Test func tokensOfTwoLabelsShareNeitherAnExchangeNorTheCache() async throws {
        try await ScriptedServer.with({ received in
            ScriptedServer.held(ScriptedServer.response("200 OK", ["Cache-Control: max-age=600"], body: received.field("Authorization") ?? "none"))
        }) { server in
            let events = RecordedResilienceEvents()
            let storage = InMemoryAccessTokenStorage([
                "alice": AccessToken(accessToken: "token-alice"), "bob": AccessToken(accessToken: "token-bob"),
            ])
            let client = Client(baseURL: server.url) {
                $0.accessTokens = AccessTokenSettings(storage: storage)
                $0.useFrozenCache()
                $0.resilience.coalescing = Coalescing()
                $0.observability.eventMonitors = [events]
            }
            func request(_ label: String) throws -> Request {
                var request = try Request(method: .get, url: server.url.appending(path: "me"))
                request.accessToken = AccessTokenRequirement(label: label)
                return request
            }
            let (alice, bob) = (try request("alice"), try request("bob"))
            let first = Task { try await client.data(for: alice).body }
            var arrivals = server.arrivals.makeAsyncIterator()
            _ = await arrivals.next()
            let second = Task { try await client.data(for: bob).body }
            let joined = await Self.joinsRatherThanArrives(events, server)
            server.releaseHeld()
            let answers = [String(decoding: try await first.value, as: UTF8.self), String(decoding: try await second.value, as: UTF8.self)]
            #expect(!joined)
            #expect(answers == ["Bearer token-alice", "Bearer token-bob"])
            // Stored answers to a token's request are not kept (no `public`): each asks again.
            let again = Task { try await client.data(for: bob).body }
            var more = server.arrivals.makeAsyncIterator()
            _ = await more.next()
            server.releaseHeld()
            #expect(String(decoding: try await again.value, as: UTF8.self) == "Bearer token-bob")
            #expect(server.requests.count == 3)
        }
    }

    /// A hedge goes down the hop stages again: it carries the call's credentials as its first
    /// attempt does.
    @Test func aHedgeCarriesTheCallsCredentials() async throws {
        let seen = NIOLockedValueBox(0)
        try await ScriptedServer.with({ _ in
            let number = seen.withLockedValue { $0 += 1; return $0 }
            return number == 1 ? ScriptedServer.noAnswer : ScriptedServer.response("200 OK", body: "hedge")
        }) { server in
            let client = Client(baseURL: server.url, middlewares: [BasicAuthentication(username: "ada", password: "pw"), try APIKey(.header("X-Key"), "k")]) {
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(1)))
            }
            let answer = try await client.data(for: Request(method: .get, url: server.url.appending(path: "feed"))).body
            #expect(String(decoding: answer, as: UTF8.self) == "hedge")
            #expect(server.requests.count == 2)
            #expect(server.requests.allSatisfy { $0.field("Authorization") == "Basic " + Data("ada:pw".utf8).base64EncodedString() && $0.field("X-Key") == "k" })
        }
    }

    /// A hedge sends a request of its own: it never joins the exchange of its own call's first
    /// attempt, which it is there to outrun.
    @Test func aHedgeDoesNotJoinItsOwnCallsExchange() async throws {
        let seen = NIOLockedValueBox(0)
        try await ScriptedServer.with({ _ in
            let number = seen.withLockedValue { $0 += 1; return $0 }
            return number == 1 ? ScriptedServer.held(ScriptedServer.response("200 OK", body: "slow")) : ScriptedServer.response("200 OK", body: "hedge")
        }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.resilience.coalescing = Coalescing()
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(1)))
                $0.observability.eventMonitors = [events]
            }
            let call = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "feed"))).body }
            let joined = await withTaskGroup(of: Bool.self) { group in
                group.addTask { await events.first(named: "coalesced"); return true }
                group.addTask { _ = try? await call.value; return false }
                let joined = await group.next()!
                group.cancelAll()
                return joined
            }
            server.releaseHeld()
            #expect(!joined, "the hedge joined its own call's exchange")
            let answer = try await call.value
            #expect(String(decoding: answer, as: UTF8.self) == "hedge")
        }
    }

    /// Callers that share an exchange share one HAR entry: the archive holds what went over the
    /// wire, as many entries as the server saw requests.
    @Test func aSharedExchangeIsRecordedOnce() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("200 OK", body: "shared")) }) { server in
            let events = RecordedResilienceEvents()
            let archive = HTTPArchiveMonitor()
            let client = Client(baseURL: server.url) {
                $0.resilience.coalescing = Coalescing()
                $0.observability.eventMonitors = [events, archive]
            }
            let request = try Request(method: .get, url: server.url.appending(path: "catalogue"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<10 { group.addTask { _ = try await client.data(for: request) } }
                var arrivals = server.arrivals.makeAsyncIterator()
                _ = await arrivals.next()
                await events.count(named: "coalesced", reaching: 9)
                server.releaseHeld()
                try await group.waitForAll()
            }
            #expect(server.requests.count == 1)
            #expect(archive.recorder.archive.log.entries.count == 1)
        }
    }

    /// A redirect to a server that fails: each retry attempt follows the redirect again, so
    /// the server sees (1 + retries) x hops requests, and the call ends with the last answer.
    @Test(arguments: TransportKind.allCases)
    func retriesAndRedirectsMultiplyAndNoMore(_ kind: TransportKind) async throws {
        try await ScriptedServer.with({ received in
            received.target == "/start" ? ScriptedServer.response("302 Found", ["Location: /end"]) : ScriptedServer.response("503 Service Unavailable")
        }) { server in
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 2))
            }
            let error = await #expect(throws: TrellisError.self) { try await client.data(for: Request(method: .get, url: server.url.appending(path: "start"))) }
            guard case .unacceptableStatus(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.status == .serviceUnavailable)
            #expect(server.requests.map(\.target) == ["/start", "/end", "/start", "/end", "/start", "/end"])
        }
    }

    /// Every policy that sends again, on at once, against a server that redirects and then
    /// fails: the call ends, within the product of their bounds (3 attempts, each hedged once
    /// at most, each following one redirect), and at least as often as the retries alone.
    @Test func everyPolicyThatSendsAgainIsBoundedTogether() async throws {
        try await ScriptedServer.with({ received in
            received.target == "/start" ? ScriptedServer.response("302 Found", ["Location: /end"]) : ScriptedServer.response("503 Service Unavailable")
        }) { server in
            let client = Client(baseURL: server.url) {
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 2))
                $0.resilience.hedging = Hedging(after: .fixed(.zero), maximumHedges: 1)
                $0.resilience.coalescing = Coalescing()
                $0.redirects = RedirectPolicy(maximum: 5)
            }
            let error = await #expect(throws: TrellisError.self) { try await client.data(for: Request(method: .get, url: server.url.appending(path: "start"))) }
            guard case .unacceptableStatus(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.status == .serviceUnavailable)
            #expect((6...12).contains(server.requests.count), "\(server.requests.map(\.target))")
        }
    }

    /// Whether the next call joins the exchange in flight (a `coalesced` event) rather than
    /// sending a request of its own (the server's next arrival), whichever comes first: a
    /// wrong answer fails the test instead of waiting for an arrival that never comes.
    private static func joinsRatherThanArrives(_ events: RecordedResilienceEvents, _ server: ScriptedServer) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await events.first(named: "coalesced"); return true }
            group.addTask {
                // The stream's next arrival: its earlier reader reads no more.
                var later = server.arrivals.makeAsyncIterator()
                _ = await later.next()
                return false
            }
            let joined = await group.next()!
            group.cancelAll()
            return joined
        }
    }
}
