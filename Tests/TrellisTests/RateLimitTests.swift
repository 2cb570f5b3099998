import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
@testable import Trellis
import TrellisTesting

/// The client-side rate limit against a real in-process server, on a `ManualClock`: each test
/// moves time by hand and checks what reached the server before and after.
@Suite("A client-side rate limit", .hangGuard)
struct RateLimitTests {
    /// 10 a second: one request every 100 ms. Three at once: the first goes, the others wait
    /// their turns, in order.
    @Test(arguments: TransportKind.allCases)
    func requestsGoOneTurnApart(_ kind: TransportKind) async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", body: "ok") }) { server in
            let clock = ManualClock()
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.resilience.rateLimit = RateLimit(requests: 10, per: .seconds(1))
                $0.clock = clock
                $0.observability.eventMonitors = [events]
            }
            var arrivals = server.arrivals.makeAsyncIterator()
            let calls = (0..<3).map { index in
                Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "item/\(index)"))) }
            }
            await clock.sleepers(reaching: 2)
            _ = await arrivals.next()
            #expect(server.requests.count == 1)
            #expect(clock.sleeps.sorted() == [.milliseconds(100), .milliseconds(200)])
            clock.advance(by: .milliseconds(100))
            _ = await arrivals.next()
            #expect(server.requests.count == 2)
            clock.advance(by: .milliseconds(100))
            for call in calls { _ = try await call.value }
            #expect(server.requests.count == 3)
            #expect(events.names == ["waited_for_rate_limit", "waited_for_rate_limit"])
        }
    }

    @Test func aTurnFurtherAwayThanTheLongestWaitIsRefusedAtOnce() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let clock = ManualClock()
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(requests: 1, per: .seconds(60), maximumWait: .seconds(5))
                $0.clock = clock
            }
            let request = try Request(method: .get, url: server.url)
            _ = try await client.data(for: request)
            let refusal = try await refusalOf(client, request)
            #expect(refusal.reason == .rateLimit)
            #expect(refusal.retryAt == clock.now.addingTimeInterval(60))
            #expect(refusal.description.contains("longer than the 5.0 seconds it waits"))
            #expect(server.requests.count == 1)
            // A minute on, its turn has come.
            clock.advance(by: .seconds(60))
            _ = try await client.data(for: request)
            #expect(server.requests.count == 2)
        }
    }

    /// A burst of 3 lets three go at once after a quiet spell, and then one a turn.
    @Test func aBurstLetsThatManyGoAtOnce() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let clock = ManualClock()
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(requests: 1, per: .seconds(1), burst: 3, maximumWait: .zero)
                $0.clock = clock
            }
            let request = try Request(method: .get, url: server.url)
            for _ in 0..<3 { _ = try await client.data(for: request) }
            #expect(try await refusalOf(client, request).reason == .rateLimit)
            clock.advance(by: .seconds(1))
            _ = try await client.data(for: request)
            #expect(server.requests.count == 4)
        }
    }

    /// Requests with different keys (an account each) do not share a quota.
    @Test func eachKeyHasAQuotaOfItsOwn() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK") }) { server in
            let account = HTTPField.Name("X-Account")!
            let client = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(requests: 1, per: .seconds(60), maximumWait: .zero, key: { $0.headerFields[account] ?? "" })
                $0.clock = ManualClock()
            }
            func request(for name: String) throws -> Request {
                var request = try Request(method: .get, url: server.url)
                request.headerFields[account] = name
                return request
            }
            _ = try await client.data(for: request(for: "alice"))
            _ = try await client.data(for: request(for: "bob"))
            #expect(try await refusalOf(client, request(for: "alice")).detail.contains("alice"))
            #expect(server.requests.count == 2)
        }
    }

    /// An answer that says the quota is spent, in either family of fields, holds the key's
    /// requests until it resets.
    @Test(arguments: TransportKind.allCases, [
        ["X-RateLimit-Remaining: 0", "X-RateLimit-Reset: 30"],
        ["RateLimit: \"default\";r=0;t=30"],
        ["RateLimit: limit=100, remaining=0, reset=30"],
        ["RateLimit-Remaining: 0", "RateLimit-Reset: 30"],
    ])
    func anAnswerThatSaysTheQuotaIsSpentHoldsRequestsUntilItResets(_ kind: TransportKind, _ fields: [String]) async throws {
        try await ScriptedServer.with({ received in
            received.target == "/spend" ? ScriptedServer.response("200 OK", fields) : ScriptedServer.response("200 OK", body: "ok")
        }) { server in
            let clock = ManualClock()
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.resilience.rateLimit = RateLimit(requests: 1000, per: .seconds(1), maximumWait: .seconds(60))
                $0.clock = clock
                $0.observability.eventMonitors = [events]
            }
            _ = try await client.data(for: Request(method: .get, url: server.url.appending(path: "spend")))
            let held = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "next"))) }
            await clock.sleepers(reaching: 1)
            #expect(clock.sleeps == [.seconds(30)])
            #expect(server.requests.count == 1)
            clock.advance(by: .seconds(30))
            _ = try await held.value
            #expect(server.requests.map(\.target) == ["/spend", "/next"])
            #expect(events.names == ["rate_limit_spent", "waited_for_rate_limit"])
        }
    }

    /// What a hostile or careless server puts in the fields is read safely: nothing that is
    /// not a spent quota with a believable reset holds anything.
    @Test func rateLimitFieldsAreReadSafely() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func spent(_ fields: [(String, String)]) -> Duration? {
            var head = HTTPResponse(status: .ok)
            for (name, value) in fields { head.headerFields[HTTPField.Name(name)!] = value }
            return RateLimitFields.spentFor(head, now: now)
        }
        #expect(spent([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "1800000042")]) == .seconds(42))
        #expect(spent([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "2.5")]) == .milliseconds(2500))
        #expect(spent([("X-RateLimit-Remaining", "3"), ("X-RateLimit-Reset", "30")]) == nil)
        #expect(spent([("X-RateLimit-Remaining", "0")]) == nil)
        #expect(spent([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "-5")]) == nil)
        #expect(spent([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "soon")]) == nil)
        #expect(spent([("X-RateLimit-Remaining", "zero"), ("X-RateLimit-Reset", "30")]) == nil)
        // In the past, as a Unix time; ten years away; a number too long for any clock.
        #expect(spent([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "1700000000")]) == nil)
        #expect(spent([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "315360000")]) == nil)
        #expect(spent([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", String(repeating: "9", count: 400))]) == nil)
        #expect(spent([("RateLimit", ";;==,r=,t=;=0")]) == nil)
        #expect(spent([("RateLimit", "\"burst\";r=0;t=7")]) == .seconds(7))
    }

    // MARK: Where it meets other stages

    /// Only what leaves takes a turn: a response the cache serves takes none.
    @Test func aResponseFromTheCacheTakesNoTurn() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", ["Cache-Control: max-age=600"], body: "kept") }) { server in
            let client = Client(baseURL: server.url) {
                $0.useFrozenCache()
                $0.resilience.rateLimit = RateLimit(requests: 1, per: .seconds(60), maximumWait: .zero)
            }
            let request = try Request(method: .get, url: server.url)
            for _ in 0..<3 { _ = try await client.data(for: request) }
            #expect(server.requests.count == 1)
        }
    }

    /// Callers that share one exchange take one turn between them.
    @Test func coalescedCallsTakeOneTurn() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("200 OK", body: "shared")) }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.resilience.coalescing = Coalescing()
                $0.resilience.rateLimit = RateLimit(requests: 1, per: .seconds(60), maximumWait: .zero)
                $0.clock = ManualClock()
                $0.observability.eventMonitors = [events]
            }
            let request = try Request(method: .get, url: server.url)
            let first = Task { try await client.data(for: request) }
            var arrivals = server.arrivals.makeAsyncIterator()
            _ = await arrivals.next()
            let second = Task { try await client.data(for: request) }
            await events.count(named: "coalesced", reaching: 1)
            server.releaseHeld()
            _ = try await first.value
            _ = try await second.value
            #expect(server.requests.count == 1)
        }
    }

    /// Each retry and each redirect hop is a request the server counts: each takes a turn.
    @Test func retriesAndRedirectHopsEachTakeATurn() async throws {
        try await ScriptedServer.with({ received in
            switch received.target {
            case "/moved": ScriptedServer.response("302 Found", ["Location: /here"])
            case "/failing": ScriptedServer.response("503 Service Unavailable")
            default: ScriptedServer.response("200 OK")
            }
        }) { server in
            func client() -> Client {
                Client(baseURL: server.url) {
                    $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 2))
                    $0.resilience.rateLimit = RateLimit(requests: 1, per: .seconds(60), maximumWait: .zero)
                }
            }
            let retried = try await refusalOf(client(), Request(method: .get, url: server.url.appending(path: "failing")))
            #expect(retried.reason == .rateLimit)
            let redirected = try await refusalOf(client(), Request(method: .get, url: server.url.appending(path: "moved")))
            #expect(redirected.reason == .rateLimit)
            #expect(server.requests.map(\.target) == ["/failing", "/moved"])
        }
    }
}
