import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
@testable import Trellis
import TrellisTesting

/// One clock times every policy of a client: each test drives a wait of seconds or minutes
/// with `ManualClock`, against a real in-process server, in milliseconds of real time. Each
/// checks that nothing happens before the clock is moved, and that the wait ends when it is.
/// (The breaker's cool-down is driven in ResilienceTests, the cache's ages in
/// CacheIntegrationTests.)
@Suite("One clock for every policy", .hangGuard)
struct ClientClockTests {
    @Test(arguments: TransportKind.allCases)
    func aRetryWaitsOutRetryAfterOnTheClientsClock(_ kind: TransportKind) async throws {
        let answered = NIOLockedValueBox(0)
        try await ScriptedServer.with({ _ in
            answered.withLockedValue { $0 += 1; return $0 } == 1
                ? ScriptedServer.response("429 Too Many Requests", ["Retry-After: 30"])
                : ScriptedServer.response("200 OK", body: "ok")
        }) { server in
            let clock = ManualClock()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.retry = RetryPolicy(maximumRetries: 1)
                $0.clock = clock
            }
            let call = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "quota"))).body }
            await clock.sleepers(reaching: 1)
            #expect(server.requests.count == 1)
            #expect(clock.sleeps == [.seconds(30)])
            clock.advance(by: .seconds(30))
            let body = try await call.value
            #expect(String(decoding: body, as: UTF8.self) == "ok")
            #expect(server.requests.count == 2)
        }
    }

    @Test func theSharedPauseHoldsOtherCallsUntilTheClockPassesIt() async throws {
        try await ScriptedServer.with({ received in
            received.target == "/limited"
                ? ScriptedServer.response("429 Too Many Requests", ["Retry-After: 30"])
                : ScriptedServer.response("200 OK", body: "ok")
        }) { server in
            let clock = ManualClock()
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.resilience.sharedBackoff = SharedBackoff()
                $0.clock = clock
                $0.observability.eventMonitors = [events]
            }
            _ = try? await client.data(for: Request(method: .get, url: server.url.appending(path: "limited")))
            let held = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "other"))).body }
            await clock.sleepers(reaching: 1)
            #expect(server.requests.count == 1)
            // 29 seconds on: still paused.
            clock.advance(by: .seconds(29))
            #expect(server.requests.count == 1)
            clock.advance(by: .seconds(1))
            let body = try await held.value
            #expect(String(decoding: body, as: UTF8.self) == "ok")
            #expect(server.requests.map(\.target) == ["/limited", "/other"])
            #expect(events.names == ["backoff_started", "waited_for_backoff"])
        }
    }

    @Test func aHedgeIsSentWhenTheClockPassesItsDelay() async throws {
        try await ScriptedServer.with({ received in
            received.field("X-Attempt") == nil ? ScriptedServer.noAnswer : ScriptedServer.response("200 OK", body: "hedge")
        }) { server in
            let clock = ManualClock()
            let client = Client(baseURL: server.url, middlewares: [MarkLaterAttempts(first: NIOLockedValueBox(true))]) {
                $0.resilience.hedging = Hedging(after: .fixed(.seconds(10)))
                $0.clock = clock
            }
            var arrivals = server.arrivals.makeAsyncIterator()
            let call = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "slow"))).body }
            _ = await arrivals.next()
            await clock.sleepers(reaching: 1)
            #expect(server.requests.count == 1)
            clock.advance(by: .seconds(10))
            let body = try await call.value
            #expect(String(decoding: body, as: UTF8.self) == "hedge")
            #expect(server.requests.count == 2)
        }
    }

    @Test func theConcurrencyLimitsLongestWaitIsTakenOnTheClock() async throws {
        try await ScriptedServer.with({ received in
            received.target == "/held" ? ScriptedServer.held(ScriptedServer.response("200 OK")) : ScriptedServer.response("200 OK")
        }) { server in
            let clock = ManualClock()
            let client = Client(baseURL: server.url) {
                $0.resilience.concurrencyLimit = ConcurrencyLimit(maximumInFlight: 1, maximumWait: .seconds(5))
                $0.clock = clock
            }
            var arrivals = server.arrivals.makeAsyncIterator()
            let held = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "held"))) }
            _ = await arrivals.next()
            let waiting = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "waiting"))) }
            await clock.sleepers(reaching: 1)
            clock.advance(by: .seconds(5))
            let outcome = await waiting.result
            guard case .failure(TrellisError.callRefused(let refusal)) = outcome else {
                Issue.record("expected the wait to end in a refusal, got \(outcome)")
                return
            }
            #expect(refusal.reason == .concurrencyLimit)
            server.releaseHeld()
            _ = try await held.value
            #expect(server.requests.map(\.target) == ["/held"])
        }
    }

    /// A clock that moves itself by each wait lists the waits: three retries' backoff, with
    /// no real time passing.
    @Test func aClockThatAdvancesWhenSleepingListsEachWait() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("503 Service Unavailable") }) { server in
            let clock = ManualClock(advancesWhenSleeping: true)
            let client = Client(baseURL: server.url) {
                $0.retry = RetryPolicy(maximumRetries: 3, initialDelay: .seconds(1), jitter: 0)
                $0.clock = clock
            }
            _ = try? await client.data(for: Request(method: .get, url: server.url))
            #expect(clock.sleeps == [.seconds(1), .seconds(2), .seconds(4)])
            #expect(clock.elapsed == .seconds(7))
            #expect(server.requests.count == 4)
        }
    }
}
