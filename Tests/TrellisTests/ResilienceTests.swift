import Foundation
import HTTPTypes
import InMemoryTracing
import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import Trellis
import TrellisTesting

/// Each resilience policy against a real in-process server whose failures the test scripts.
@Suite("Resilience across calls", .hangGuard)
struct ResilienceTests {
    // MARK: Retry budget

    /// gRPC's retry throttling, token by token: 10 tokens, 0.1 back per answer, retries only
    /// while more than 5 are left. A failed attempt takes a token before the retry is decided.
    @Test(arguments: TransportKind.allCases)
    func theRetryBudgetStopsRetriesAtTheRateGRPCSpecifies(_ kind: TransportKind) async throws {
        let failing = NIOLockedValueBox(true)
        try await ScriptedServer.with({ _ in
            failing.withLockedValue { $0 } ? ScriptedServer.response("503 Service Unavailable") : ScriptedServer.response("200 OK", body: "ok")
        }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 3))
                $0.resilience.retryBudget = RetryBudget(maximumTokens: 10, tokenRatio: 0.1)
                $0.observability.eventMonitors = [events]
            }
            let request = try Request(method: .get, url: server.url.appending(path: "items"))
            func requestsSent(by call: () async throws -> Void) async throws -> Int {
                let before = server.requests.count
                try await call()
                return server.requests.count - before
            }
            let failingCall = { _ = try? await client.data(for: request) }
            // 10 -> 9, 8, 7, 6: the first call is retried as often as its policy allows.
            #expect(try await requestsSent(by: failingCall) == 4)
            // 6 -> 5: at half, no retry; 5 -> 4: none either.
            #expect(try await requestsSent(by: failingCall) == 1)
            #expect(try await requestsSent(by: failingCall) == 1)
            #expect(events.names == ["retry_refused_by_budget", "retry_refused_by_budget"])

            // 21 answers put 2.1 tokens back: 6.1.
            failing.withLockedValue { $0 = false }
            for _ in 0..<21 { _ = try await client.data(for: request) }
            failing.withLockedValue { $0 = true }
            // 6.1 -> 5.1, still above half: one retry; 5.1 -> 4.1: no more.
            #expect(try await requestsSent(by: failingCall) == 2)
            #expect(events.names.count == 3)
        }
    }

    /// Budgets are per origin: one origin's failures do not stop retries to another.
    @Test func theRetryBudgetIsKeptPerOrigin() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("503 Service Unavailable") }) { failing in
            try await ScriptedServer.with({ _ in ScriptedServer.response("503 Service Unavailable") }) { other in
                let client = Client(baseURL: failing.url) {
                    $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 1))
                    $0.resilience.retryBudget = RetryBudget(maximumTokens: 2, tokenRatio: 0.1)
                }
                // 2 -> 1: at half, no retry.
                _ = try? await client.data(for: Request(method: .get, url: failing.url))
                #expect(failing.requests.count == 1)
                _ = try? await client.data(for: Request(method: .get, url: other.url))
                #expect(other.requests.count == 1)
            }
        }
    }

    /// The key every policy keeps its state by: one origin however the URL spells it.
    @Test func anOriginIsOneHoweverItsURLSpellsIt() {
        let origin = { (url: String) in Request.origin(of: URL(string: url)!) }
        #expect(origin("https://API.Example.com/v1") == "https://api.example.com:443")
        #expect(origin("https://api.example.com:443/v2?q=1") == "https://api.example.com:443")
        #expect(origin("HTTP://api.example.com") == "http://api.example.com:80")
        #expect(origin("http://api.example.com:8080") == "http://api.example.com:8080")
        #expect(origin("http://[::1]/") == "http://[::1]:80")
        #expect(origin("http://[::1]:8080/") == "http://[::1]:8080")
        #expect(origin("ftp://example.com") == nil)
    }

    // MARK: Circuit breaker

    @Test(arguments: TransportKind.allCases)
    func theCircuitBreakerOpensFailsFastProbesAndCloses(_ kind: TransportKind) async throws {
        let failing = NIOLockedValueBox(true)
        try await ScriptedServer.with({ _ in
            failing.withLockedValue { $0 } ? ScriptedServer.response("500 Internal Server Error") : ScriptedServer.response("200 OK", body: "ok")
        }) { server in
            let clock = ManualClock()
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(3), coolDown: .seconds(30), probes: 2)
                $0.clock = clock
                $0.observability.eventMonitors = [events]
            }
            let request = try Request(method: .get, url: server.url.appending(path: "report"))
            for _ in 0..<3 { _ = try? await client.data(for: request) }
            #expect(server.requests.count == 3)
            #expect(events.names == ["circuit_opened"])

            // Open: refused at once, nothing sent, the error names the origin and the time.
            let refusal = try await refusalOf(client, request)
            #expect(refusal.reason == .circuitOpen)
            #expect(refusal.origin == "http://127.0.0.1:\(server.url.port!)")
            #expect(refusal.description.contains("3 failures in a row"))
            let retryAt = try #require(refusal.retryAt)
            #expect(retryAt == clock.now.addingTimeInterval(30))
            #expect(server.requests.count == 3)

            // After the cool-down, two probes must answer before it closes.
            clock.advance(by: .seconds(30))
            failing.withLockedValue { $0 = false }
            _ = try await client.data(for: request)
            _ = try await client.data(for: request)
            #expect(server.requests.count == 5)
            #expect(events.names == ["circuit_opened", "call_refused", "circuit_half_opened", "circuit_closed"])

            // Closed again: a failing probe would have opened it; a new run of failures does.
            failing.withLockedValue { $0 = true }
            for _ in 0..<3 { _ = try? await client.data(for: request) }
            clock.advance(by: .seconds(30))
            _ = try? await client.data(for: request)  // the probe fails: open again
            #expect(try await refusalOf(client, request).reason == .circuitOpen)
            #expect(server.requests.count == 9)
            #expect(events.names.suffix(4) == ["circuit_opened", "circuit_half_opened", "circuit_opened", "call_refused"])
        }
    }

    /// Refused attempts are not retried: the retry policy sees a refusal, not a failure.
    @Test func anOpenCircuitIsNotRetried() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("503 Service Unavailable") }) { server in
            let client = Client(baseURL: server.url) {
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 5))
                $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(2))
            }
            let request = try Request(method: .get, url: server.url)
            let refusal = try await refusalOf(client, request)
            #expect(refusal.reason == .circuitOpen)
            #expect(server.requests.count == 2)
        }
    }

    /// A call a later policy refused was never sent: it tells the breaker nothing, and does
    /// not break a run of failures.
    @Test func aCallRefusedByTheConcurrencyLimitDoesNotCountForTheBreaker() async throws {
        try await ScriptedServer.with({ received in
            let failure = ScriptedServer.response("500 Internal Server Error")
            return received.target == "/held" ? ScriptedServer.held(failure) : failure
        }) { server in
            let client = Client(baseURL: server.url) {
                $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(2))
                $0.resilience.concurrencyLimit = ConcurrencyLimit(maximumInFlight: 1, maximumWaiting: 0)
            }
            _ = try? await client.data(for: Request(method: .get, url: server.url))  // failure 1
            let held = Task { try? await client.data(for: Request(method: .get, url: server.url.appending(path: "held"))) }
            var arrivals = server.arrivals.makeAsyncIterator()
            while let arrival = await arrivals.next(), arrival.target != "/held" {}
            // Refused by the limit, after the breaker let it through.
            let limited = try await refusalOf(client, Request(method: .get, url: server.url))
            #expect(limited.reason == .concurrencyLimit)
            server.releaseHeld()
            _ = await held.value  // failure 2: the circuit opens
            let open = try await refusalOf(client, Request(method: .get, url: server.url))
            #expect(open.reason == .circuitOpen)
            #expect(server.requests.count == 2)
        }
    }

    @Test func aFailureRateOverTheWindowOpensTheCircuit() {
        let breaker = CircuitBreaker(opensAfter: .failureRate(0.5, minimumCalls: 10, window: .seconds(10)))
        var state = CircuitState(breaker)
        let clock = ManualClock()
        // Four answers and five failures: nine attempts, under the minimum.
        for index in 0..<9 {
            #expect(state.record(failed: index % 2 == 1 || index == 8, probe: false, clock: clock, breaker) == nil)
        }
        // The tenth, a failure: 6 of 10.
        clock.advance(by: .seconds(1))
        let change = state.record(failed: true, probe: false, clock: clock, breaker)
        guard case .opened(_, let detail) = change else {
            Issue.record("the circuit did not open: \(String(describing: change))")
            return
        }
        #expect(detail.contains("6 of the last 10"))
        // Outcomes that fell out of the window count no more.
        var later = CircuitState(breaker)
        let laterClock = ManualClock()
        for _ in 0..<9 { _ = later.record(failed: true, probe: false, clock: laterClock, breaker) }
        laterClock.advance(by: .seconds(11))
        #expect(later.record(failed: true, probe: false, clock: laterClock, breaker) == nil)
    }

    // MARK: Concurrency limit

    /// Twelve calls, three at a time. The test waits only on what every ordering produces:
    /// nine calls in line, then the first three requests held together; from then on the server
    /// answers whatever it holds as each request arrives, until every call has ended. (It used
    /// to answer three at a time, counting arrivals: a call that failed or was refused, as one
    /// that waits out `maximumWait` on a slow machine is, never arrived, and the test waited
    /// for it until its hang guard.) Nothing is retried and nothing times out, so a failure
    /// ends the test as a failure.
    @Test(arguments: TransportKind.allCases)
    func theConcurrencyLimitKeepsAtMostNInFlight(_ kind: TransportKind) async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("200 OK", body: "ok")) }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.resilience.concurrencyLimit = ConcurrencyLimit(maximumInFlight: 3, maximumWait: .seconds(3600))
                $0.observability.eventMonitors = [events]
                $0.retry = .none
                $0.timeouts.request = .seconds(3600)
            }
            let request = try Request(method: .get, url: server.url.appending(path: "work"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<12 { group.addTask { _ = try await client.data(for: request) } }
                // Three go, nine wait in line.
                await events.count(named: "concurrency_limit_reached", reaching: 9)
                var arrivals = server.arrivals.makeAsyncIterator()
                for _ in 0..<3 { _ = await arrivals.next() }
                // Each answer lets one more go. An answer is held before its arrival is told,
                // so every held answer is released after it.
                let answering = Task {
                    server.releaseHeld()
                    var later = server.arrivals.makeAsyncIterator()
                    while await later.next() != nil { server.releaseHeld() }
                }
                defer { answering.cancel() }
                try await group.waitForAll()
            }
            #expect(server.requests.count == 12)
            #expect(server.mostHeldAtOnce == 3)
            #expect(events.names == Array(repeating: "concurrency_limit_reached", count: 9))
        }
    }

    /// The hand-over of places under contention: two hundred callers arrive while places are
    /// freed and a fifth of them give up as they queue. No wake-up is lost (every call ends,
    /// answered or cancelled), never more than the limit are in flight, and the origin is idle
    /// at the end.
    @Test func theConcurrencyLimitLosesNoWakeUpWhilePlacesAreFreedAndWaitersGiveUp() async throws {
        let limit = ConcurrencyLimit(maximumInFlight: 3, maximumWait: .seconds(3600))
        let context = PolicyContext()
        let origins = context.origins
        let stage = ConcurrencyLimitStage(limit, context: context)
        let inFlight = NIOLockedValueBox((now: 0, most: 0))
        let next = Pipeline.Next(pipeline: Pipeline(stages: [], transport: MockTransport()), from: 0) { _, _ in
            inFlight.withLockedValue { $0.now += 1; $0.most = max($0.most, $0.now) }
            // Others queue and give up while this one holds its place.
            await Task.yield()
            inFlight.withLockedValue { $0.now -= 1 }
            return Response(head: HTTPResponse(status: .ok), body: ResponseBody())
        }
        let request = try Request(method: .get, url: URL(string: "https://api.test/x")!)
        let calls = (0..<200).map { _ in Task { try await stage.intercept(request, CallContext(), next: next) } }
        for (index, call) in calls.enumerated() where index % 5 == 0 { call.cancel() }
        var (answered, cancelled) = (0, 0)
        for call in calls {
            do {
                _ = try await call.value
                answered += 1
            } catch is CancellationError {
                cancelled += 1
            }
        }
        #expect(answered + cancelled == 200)
        #expect(answered >= 160)
        #expect(inFlight.withLockedValue { $0.most } <= 3)
        let (stillInFlight, stillWaiting) = origins.record(for: request.origin).withState(OriginStateKey<ConcurrencySlots>(limit)) { ($0.inFlight, $0.waiters.count) }
        #expect(stillInFlight == 0 && stillWaiting == 0)
    }

    @Test func aCallThatWaitsTooLongForTheConcurrencyLimitIsRefused() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("200 OK", body: "ok")) }) { server in
            let client = Client(baseURL: server.url) {
                $0.resilience.concurrencyLimit = ConcurrencyLimit(maximumInFlight: 1, maximumWait: .milliseconds(50))
            }
            let request = try Request(method: .get, url: server.url)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await client.data(for: request) }
                var arrivals = server.arrivals.makeAsyncIterator()
                _ = await arrivals.next()
                let refusal = try await refusalOf(client, request)
                #expect(refusal.reason == .concurrencyLimit)
                #expect(refusal.description.contains("waited"))
                server.releaseHeld()
                try await group.waitForAll()
            }
            #expect(server.requests.count == 1)
            // The place came back: the next call goes at once.
            let next = Task { try await client.data(for: request) }
            var arrivals = server.arrivals.makeAsyncIterator()
            _ = await arrivals.next()
            server.releaseHeld()
            _ = try await next.value
        }
    }

    // MARK: Shared backoff

    /// One `429 Retry-After: 2` pauses every caller: none of the 50 that come after it reaches
    /// the server before the two seconds are over.
    @Test(arguments: TransportKind.allCases)
    func aRetryAfterHoldsEveryCallerUntilItsTime(_ kind: TransportKind) async throws {
        let answered = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
        try await ScriptedServer.with({ received in
            answered.withLockedValue { first in
                guard first == nil else { return ScriptedServer.response("200 OK", body: "ok") }
                first = received.arrived
                return ScriptedServer.response("429 Too Many Requests", ["Retry-After: 2"])
            }
        }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.resilience.sharedBackoff = SharedBackoff()
                $0.observability.eventMonitors = [events]
            }
            let request = try Request(method: .get, url: server.url.appending(path: "quota"))
            await #expect(throws: TrellisError.self) { try await client.data(for: request) }
            let pauseAsked = try #require(answered.withLockedValue { $0 })
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<50 { group.addTask { _ = try await client.data(for: request) } }
                try await group.waitForAll()
            }
            let later = server.requests.dropFirst()
            #expect(later.count == 50)
            #expect(later.allSatisfy { $0.arrived >= pauseAsked + .seconds(2) })
            // How many of them had to wait depends on how fast the machine started them; that
            // none came early is the point.
            #expect(events.names.first == "backoff_started")
        }
    }

    @Test func aPauseLongerThanTheClientWaitsRefusesCallsAtOnce() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("503 Service Unavailable", ["Retry-After: 3600"]) }) { server in
            let client = Client(baseURL: server.url) { $0.resilience.sharedBackoff = SharedBackoff(maximumWait: .seconds(5)) }
            let request = try Request(method: .get, url: server.url)
            _ = try? await client.data(for: request)
            let refusal = try await refusalOf(client, request)
            #expect(refusal.reason == .rateLimited)
            #expect(refusal.description.contains("longer than the 5.0 seconds the client waits"))
            let retryAt = try #require(refusal.retryAt)
            #expect(retryAt.timeIntervalSinceNow > 3500)
            #expect(server.requests.count == 1)
        }
    }

    @Test func aRateLimitResetFieldIsReadWhenRetryAfterIsAbsent() throws {
        let field = try #require(HTTPField.Name("X-RateLimit-Reset"))
        let unix = SharedBackoff(resetField: RateLimitReset(field, meaning: .unixTime))
        var head = HTTPResponse(status: .tooManyRequests)
        head.headerFields[field] = "1800000042"
        #expect(unix.pause(askedBy: head) == .seconds(42))
        let relative = SharedBackoff(resetField: RateLimitReset(field, meaning: .secondsFromNow))
        #expect(relative.pause(askedBy: head) == .seconds(1_800_000_042))
        head.headerFields[.retryAfter] = "7"
        #expect(unix.pause(askedBy: head) == .seconds(7))
        // Not a status that shares its pause; not a number; in the past.
        #expect(unix.pause(askedBy: HTTPResponse(status: .ok, headerFields: head.headerFields)) == nil)
        head.headerFields[.retryAfter] = nil
        head.headerFields[field] = "soon"
        #expect(unix.pause(askedBy: head) == nil)
        head.headerFields[field] = "1700000000"
        #expect(unix.pause(askedBy: head) == nil)
    }

    // MARK: Hedging

    /// The first attempt never answers; the hedge does, and wins. The server sees the first
    /// attempt's connection closed.
    @Test(arguments: TransportKind.allCases)
    func aHedgeAnswersAndTheLoserIsCancelled(_ kind: TransportKind) async throws {
        try await ScriptedServer.with({ received in
            received.target.hasSuffix("slow") && received.numberOnConnection == 1 && received.field("X-Attempt") == nil
                ? ScriptedServer.noAnswer : ScriptedServer.response("200 OK", body: "quick")
        }) { server in
            let first = NIOLockedValueBox(true)
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport, middlewares: [MarkLaterAttempts(first: first)]) {
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(50)))
                $0.observability.eventMonitors = [events]
            }
            var closes = server.closes.makeAsyncIterator()
            let body = try await client.data(for: Request(method: .get, url: server.url.appending(path: "slow"))).body
            #expect(String(decoding: body, as: UTF8.self) == "quick")
            #expect(server.requests.count == 2)
            #expect(events.names == ["hedge_sent"])
            // The loser's connection closes: it was cancelled, not left to hang.
            _ = await closes.next()
        }
    }

    /// The first attempt answers while the hedge is out: it wins, and the hedge is cancelled,
    /// which the server sees as its connection closing. Both attempts carry the call's trace
    /// context: the hedge runs in a task the call made.
    @Test(arguments: TransportKind.allCases)
    func theFirstAttemptWinsAndTheHedgeIsCancelled(_ kind: TransportKind) async throws {
        try await ScriptedServer.with({ received in
            received.field("X-Attempt") == nil
                ? ScriptedServer.held(ScriptedServer.response("200 OK", body: "first")) : ScriptedServer.noAnswer
        }) { server in
            let first = NIOLockedValueBox(true)
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport, middlewares: [MarkLaterAttempts(first: first)]) {
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(20)))
                $0.observability = .init(tracer: InMemoryTracer(), eventMonitors: [events])
            }
            var arrivals = server.arrivals.makeAsyncIterator()
            var closes = server.closes.makeAsyncIterator()
            let call = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "slow"))).body }
            _ = await arrivals.next()
            _ = await arrivals.next()
            server.releaseHeld()
            let body = try await call.value
            #expect(String(decoding: body, as: UTF8.self) == "first")
            #expect(events.names == ["hedge_sent"])
            // The hedge's connection closes; the first attempt's stays open for the next call.
            _ = await closes.next()
            let traces = server.requests.map { $0.field(InMemoryTracer.traceIDKey) }
            #expect(traces.count == 2 && traces[0] != nil && traces[0] == traces[1])
        }
    }

    /// A hedge sees the caller's own task-local values: a hop middleware that reads a tenant
    /// from one sends it with the first attempt and with the hedge alike.
    @Test(arguments: TransportKind.allCases)
    func aHedgeSeesTheCallersTaskLocalValues(_ kind: TransportKind) async throws {
        try await ScriptedServer.with({ received in
            received.field("X-Attempt") == nil ? ScriptedServer.noAnswer : ScriptedServer.response("200 OK", body: "hedge")
        }) { server in
            let client = Client(
                baseURL: server.url, transport: kind.transport,
                middlewares: [TenantHeader(), MarkLaterAttempts(first: NIOLockedValueBox(true))]
            ) {
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(20)))
            }
            let body = try await Tenant.$id.withValue("acme") {
                try await client.data(for: Request(method: .get, url: server.url.appending(path: "slow"))).body
            }
            #expect(String(decoding: body, as: UTF8.self) == "hedge")
            // The hedge's request carries the caller's value. The first attempt's may not have
            // left before the hedge's answer ended the call (URLSession under ThreadSanitizer:
            // the server saw only the hedge's); any that did carries it too.
            let hedges = server.requests.filter { $0.field("X-Attempt") != nil }
            #expect(hedges.map { $0.field("X-Tenant") } == ["acme"])
            #expect(server.requests.allSatisfy { $0.field("X-Tenant") == "acme" })
        }
    }

    /// The order of a race's ends, each chosen by the test, over a transport of its own: each
    /// case's answer, and which exchanges were cancelled.
    @Test func aRaceEndsWithTheFirstAnswerWhateverFailedBefore() async throws {
        let get = try Request(method: .get, url: URL(string: "http://gated.test/items")!)
        func race(_ ends: (GatedTransport) async throws -> Void) async throws -> (body: String?, error: (any Error)?, cancelled: Set<Int>) {
            let transport = GatedTransport()
            let client = Client(baseURL: URL(string: "http://gated.test")!, transport: transport) {
                $0.retry = .none
                $0.resilience.hedging = Hedging(after: .fixed(.zero))
            }
            let call = Task { try await client.data(for: get).body }
            var started = transport.started.makeAsyncIterator()
            _ = await started.next()
            _ = await started.next()
            try await ends(transport)
            do {
                let body = try await call.value
                return (String(decoding: body, as: UTF8.self), nil, transport.cancelled)
            } catch {
                return (nil, error, transport.cancelled)
            }
        }
        let refusal = { (host: String) in TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "refused")) }

        // The first attempt fails while the hedge is out: the call waits for the hedge.
        let firstFails = try await race { $0.end(1, with: .failure(refusal("first"))); $0.end(2, with: .success("hedge")) }
        #expect(firstFails.body == "hedge")
        // The hedge fails: the first attempt still answers.
        let hedgeFails = try await race { $0.end(2, with: .failure(refusal("hedge"))); $0.end(1, with: .success("first")) }
        #expect(hedgeFails.body == "first")
        // Both fail, in either order: the call fails as its first attempt did.
        let bothFail = try await race { $0.end(2, with: .failure(refusal("hedge"))); $0.end(1, with: .failure(refusal("first"))) }
        guard case TrellisError.connectionFailed(let failure)? = bothFail.error else {
            Issue.record("expected the first attempt's failure, got \(String(describing: bothFail.error))")
            return
        }
        #expect(failure.host == "first")
        // The hedge answers first: the first attempt, in the caller's task, is called off.
        let hedgeWins = try await race { $0.end(2, with: .success("hedge")) }
        #expect(hedgeWins.body == "hedge")
        #expect(hedgeWins.cancelled == [1])
        // The first answers first: the hedge is cancelled.
        let firstWins = try await race { $0.end(1, with: .success("first")) }
        #expect(firstWins.body == "first")
        #expect(firstWins.cancelled == [2])
    }

    /// Cancelling the caller cancels every attempt out, and sends no more hedges.
    @Test func cancellingTheCallerCancelsEveryAttempt() async throws {
        let transport = GatedTransport()
        let client = Client(baseURL: URL(string: "http://gated.test")!, transport: transport) {
            $0.retry = .none
            $0.resilience.hedging = Hedging(after: .fixed(.zero), maximumHedges: 2)
        }
        let call = Task { try await client.data(for: Request(method: .get, url: URL(string: "http://gated.test/items")!)) }
        var started = transport.started.makeAsyncIterator()
        for _ in 0..<3 { _ = await started.next() }
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        #expect(transport.cancelled == [1, 2, 3])
    }

    /// A POST is not idempotent: it is never hedged, however slow.
    @Test func aPostIsNotHedged() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("200 OK", body: "done")) }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.resilience.hedging = Hedging(after: .fixed(.zero))
                $0.observability.eventMonitors = [events]
            }
            let call = Task { try await client.data(for: Request(method: .post, url: server.url, body: RequestBody("x"))) }
            var arrivals = server.arrivals.makeAsyncIterator()
            _ = await arrivals.next()
            server.releaseHeld()
            _ = try await call.value
            #expect(server.requests.count == 1)
            #expect(events.names.isEmpty)
        }
    }

    /// A spent retry budget sends no hedge.
    @Test func hedgesDrawOnTheRetryBudget() async throws {
        try await ScriptedServer.with({ received in
            received.target == "/fail"
                ? ScriptedServer.response("503 Service Unavailable")
                : ScriptedServer.held(ScriptedServer.response("200 OK", body: "late"))
        }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.resilience.retryBudget = RetryBudget(maximumTokens: 2)
                $0.resilience.hedging = Hedging(after: .fixed(.zero))
                $0.observability.eventMonitors = [events]
            }
            // Two failures spend it (2 -> 0); a POST is not hedged, so each sends one request.
            for _ in 0..<2 { _ = try? await client.data(for: Request(method: .post, url: server.url.appending(path: "fail"))) }
            let call = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "slow"))) }
            var arrivals = server.arrivals.makeAsyncIterator()
            while let arrival = await arrivals.next(), arrival.target != "/slow" {}
            // The hedge's turn comes and goes: its refusal is reported.
            await events.first(named: "retry_refused_by_budget")
            server.releaseHeld()
            _ = try await call.value
            #expect(server.requests.count == 3)
            #expect(!events.names.contains("hedge_sent"))
        }
    }

    @Test func thePercentileDelayIsTakenFromRecentAnswers() {
        var latencies = RecentLatencies(Hedging(after: .fixed(.zero)))
        for milliseconds in 1...9 { latencies.record(.milliseconds(milliseconds)) }
        #expect(latencies.value(at: 0.9) == nil)
        latencies.record(.milliseconds(100))
        #expect(latencies.value(at: 0.9) == .milliseconds(9))
        #expect(latencies.value(at: 0.95) == .milliseconds(100))
        #expect(latencies.value(at: 0.5) == .milliseconds(5))
    }

    // MARK: Origin records

    /// The policies' one record per origin: a client that calls endless origins keeps at most
    /// the table's capacity, and an origin whose circuit is open, or whose budget is not full,
    /// is not forgotten to make room.
    @Test func theOriginRecordsForgetIdleOriginsFirst() throws {
        let breaker = CircuitBreaker(opensAfter: .consecutiveFailures(1), coolDown: .seconds(60))
        let circuit = OriginStateKey<CircuitState>(breaker)
        let clock = ManualClock()
        let origins = OriginRecords(clock: clock)
        let open = origins.record(for: "https://open.test")
        let change = open.withState(circuit) { $0.record(failed: true, probe: false, clock: clock, breaker) }
        #expect(change != nil)
        let busy = origins.record(for: "https://busy.test")
        busy.withState(OriginStateKey<RetryTokens>(RetryBudget())) { $0.recordFailure() }
        for number in 0..<(OriginRecords.capacity * 3) { _ = origins.record(for: "https://\(number).test") }
        #expect(origins.count <= OriginRecords.capacity)
        #expect(origins.record(for: "https://open.test") === open)
        #expect(origins.record(for: "https://busy.test") === busy)
        #expect(origins.record(for: "https://open.test").withState(circuit) { $0.phase } != .closed)
    }

    // MARK: Coalescing

    @Test(arguments: TransportKind.allCases)
    func aHundredIdenticalGETsSendOneRequest(_ kind: TransportKind) async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("200 OK", body: "shared")) }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.resilience.coalescing = Coalescing()
                $0.observability.eventMonitors = [events]
            }
            let request = try Request(method: .get, url: server.url.appending(path: "catalogue"))
            let bodies = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<100 {
                    group.addTask { String(decoding: try await client.data(for: request).body, as: UTF8.self) }
                }
                var arrivals = server.arrivals.makeAsyncIterator()
                _ = await arrivals.next()
                await events.count(named: "coalesced", reaching: 99)
                server.releaseHeld()
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(bodies.count == 100 && bodies.allSatisfy { $0 == "shared" })
            #expect(server.requests.count == 1)
        }
    }

    @Test func callsWithDifferentCredentialsAreNotCoalesced() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("200 OK", body: "yours")) }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.resilience.coalescing = Coalescing()
                $0.observability.eventMonitors = [events]
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<100 {
                    var request = try Request(method: .get, url: server.url.appending(path: "me"))
                    request.headerFields[.authorization] = index % 2 == 0 ? "Bearer alice" : "Bearer bob"
                    group.addTask { [request] in _ = try await client.data(for: request) }
                }
                var arrivals = server.arrivals.makeAsyncIterator()
                for _ in 0..<2 { _ = await arrivals.next() }
                await events.count(named: "coalesced", reaching: 98)
                server.releaseHeld()
                try await group.waitForAll()
            }
            #expect(server.requests.count == 2)
            #expect(Set(server.requests.compactMap { $0.field("Authorization") }) == ["Bearer alice", "Bearer bob"])
        }
    }

    /// With the HTTP cache, callers that miss together cost one fetch, and later callers none.
    @Test func withTheCacheEachMissIsOneFetch() async throws {
        try await ScriptedServer.with({ _ in
            ScriptedServer.held(ScriptedServer.response("200 OK", ["Cache-Control: max-age=600"], body: "cached"))
        }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.useFrozenCache()
                $0.resilience.coalescing = Coalescing()
                $0.observability.eventMonitors = [events]
            }
            let request = try Request(method: .get, url: server.url.appending(path: "prices"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 { group.addTask { _ = try await client.data(for: request) } }
                var arrivals = server.arrivals.makeAsyncIterator()
                _ = await arrivals.next()
                await events.count(named: "coalesced", reaching: 19)
                server.releaseHeld()
                try await group.waitForAll()
            }
            for _ in 0..<20 { _ = try await client.data(for: request) }
            #expect(server.requests.count == 1)
        }
    }

    /// The caller whose request it was gives up: the others start again, one of them sending.
    @Test func whenTheFirstCallerIsCancelledTheOthersGoOn() async throws {
        try await ScriptedServer.with({ received in
            received.field("X-Leader") != nil ? ScriptedServer.noAnswer : ScriptedServer.response("200 OK", body: "again")
        }) { server in
            let events = RecordedResilienceEvents()
            let client = Client(baseURL: server.url) {
                $0.resilience.coalescing = Coalescing(ignoring: [HTTPField.Name("X-Leader")!])
                $0.observability.eventMonitors = [events]
            }
            var leading = try Request(method: .get, url: server.url.appending(path: "report"))
            leading.headerFields[HTTPField.Name("X-Leader")!] = "yes"
            let leader = Task { [leading] in try await client.data(for: leading) }
            var arrivals = server.arrivals.makeAsyncIterator()
            _ = await arrivals.next()
            let follower = Task { try await client.data(for: Request(method: .get, url: server.url.appending(path: "report"))) }
            await events.count(named: "coalesced", reaching: 1)
            leader.cancel()
            let body = try await follower.value.body
            #expect(String(decoding: body, as: UTF8.self) == "again")
            #expect(server.requests.count == 2)
        }
    }
}

extension SharedBackoff {
    /// The pause `head` asks for at 2027-01-15 08:00 UTC, by the pause's own rule.
    fileprivate func pause(askedBy head: HTTPResponse) -> Duration? {
        pause(askedBy: head, failures: PolicyContext().failures(of: self)!, now: Date(timeIntervalSince1970: 1_800_000_000))
    }
}

/// A transport whose exchanges each wait for the test to end them (``end(_:with:)``), so that
/// a test chooses the order in which a race's attempts end; it records which were cancelled.
final class GatedTransport: Transport {
    private struct State {
        var started = 0
        var waiting: [Int: CheckedContinuation<Trellis.Response<ResponseBody>, any Error>] = [:]
        var cancelled: Set<Int> = []
    }

    private let state = NIOLockedValueBox(State())
    /// Yields each exchange's number, from 1, once it waits.
    let started: AsyncStream<Int>
    private let startedSink: AsyncStream<Int>.Continuation

    init() {
        (started, startedSink) = AsyncStream.makeStream()
    }

    var cancelled: Set<Int> { state.withLockedValue { $0.cancelled } }

    func send(_ request: Trellis.Request, within limits: ExchangeLimits) async throws -> Trellis.Response<ResponseBody> {
        let number = state.withLockedValue { state in
            state.started += 1
            return state.started
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let cancelled = state.withLockedValue { state in
                    if !state.cancelled.contains(number) { state.waiting[number] = continuation }
                    return state.cancelled.contains(number)
                }
                if cancelled { continuation.resume(throwing: CancellationError()) } else { startedSink.yield(number) }
            }
        } onCancel: {
            let waiting = state.withLockedValue { state in
                state.cancelled.insert(number)
                return state.waiting.removeValue(forKey: number)
            }
            waiting?.resume(throwing: CancellationError())
        }
    }

    /// Ends exchange `number` with `status` (`200` unless given) and `result`'s text, or with its
    /// error.
    func end(_ number: Int, with result: Result<String, any Error>, status: HTTPResponse.Status = .ok) {
        let waiting = state.withLockedValue { $0.waiting.removeValue(forKey: number) }
        waiting?.resume(with: result.map { Trellis.Response(head: HTTPResponse(status: status), body: ResponseBody(ByteBuffer(string: $0))) })
    }
}

/// A tenant the caller works for, in a task-local value of the test's own.
private enum Tenant {
    @TaskLocal static var id: String?
}

/// Sends the caller's tenant (``Tenant``) with every attempt, as a user's middleware that reads
/// a task-local would.
private struct TenantHeader: Middleware {
    var scope: MiddlewareScope { .hop }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        var request = request
        request.headerFields[HTTPField.Name("X-Tenant")!] = Tenant.id
        return try await next(request)
    }
}

/// Marks every attempt after the first, so the server can tell the hedge from the original.
struct MarkLaterAttempts: Middleware {
    let first: NIOLockedValueBox<Bool>
    var scope: MiddlewareScope { .hop }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        guard !first.withLockedValue({ isFirst in defer { isFirst = false }; return isFirst }) else { return try await next(request) }
        var request = request
        request.headerFields[HTTPField.Name("X-Attempt")!] = "later"
        return try await next(request)
    }
}

/// The resilience events of a client's calls, in order.
final class RecordedResilienceEvents: ClientEventMonitor {
    private struct Waiter {
        let id: Int
        let name: String
        let count: Int
        let continuation: CheckedContinuation<Void, Never>
    }

    private let recorded = NIOLockedValueBox<(names: [String], waiters: [Waiter], nextID: Int)>(([], [], 0))

    var names: [String] { recorded.withLockedValue { $0.names } }

    func resilienceEvent(_ event: ResilienceEvent, for request: Request) {
        let ready = recorded.withLockedValue { state in
            state.names.append(event.name)
            let names = state.names
            let ready = state.waiters.filter { waiter in names.filter { $0 == waiter.name }.count >= waiter.count }
            state.waiters.removeAll { waiter in ready.contains { $0.id == waiter.id } }
            return ready
        }
        for waiter in ready { waiter.continuation.resume() }
    }

    /// Returns once `count` events named `name` have been seen, or the test is cancelled (its
    /// time limit passed).
    func count(named name: String, reaching count: Int) async {
        let id = recorded.withLockedValue { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let done = recorded.withLockedValue { state in
                    guard state.names.filter({ $0 == name }).count < count, !Task.isCancelled else { return true }
                    state.waiters.append(Waiter(id: id, name: name, count: count, continuation: continuation))
                    return false
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            let waiter = recorded.withLockedValue { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume()
        }
    }

    func first(named name: String) async { await count(named: name, reaching: 1) }
}
