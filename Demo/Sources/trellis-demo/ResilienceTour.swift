// The resilience part of the tour: a service protecting itself and a flaky dependency with a
// retry budget, a circuit breaker and shared backoff; identical reads coalesced; a client-side
// rate limit; a slow tail hedged.
import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import Trellis

/// The dependency: an inventory that is down for its first four requests, a rate limit that
/// asks for a one-second pause once, a catalogue many callers read at once, and a search
/// whose every fifth answer is slow.
enum FlakyDependencyRoutes {
    static func install(_ router: Router<BasicRequestContext>) {
        let inventoryRequests = NIOLockedValueBox(0)
        router.get("inventory") { _, _ -> Hummingbird.Response in
            let number = inventoryRequests.next()
            return number <= 4 ? Hummingbird.Response(status: .serviceUnavailable) : Hummingbird.Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "42 in stock")))
        }
        let quotaRequests = NIOLockedValueBox(0)
        router.get("quota") { _, _ -> Hummingbird.Response in
            return quotaRequests.next() == 1 ? Hummingbird.Response(status: .tooManyRequests, headers: [.retryAfter: "1"]) : Hummingbird.Response(status: .ok)
        }
        let catalogueRequests = NIOLockedValueBox(0)
        router.get("catalogue") { _, _ -> Hummingbird.Response in
            let number = catalogueRequests.next()
            try await Task.sleep(for: .milliseconds(200))
            return Hummingbird.Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "catalogue, fetch \(number)")))
        }
        router.get("metered") { _, _ -> Hummingbird.Response in
            Hummingbird.Response(status: .ok)
        }
        let searchRequests = NIOLockedValueBox(0)
        router.get("search") { _, _ -> Hummingbird.Response in
            let number = searchRequests.next()
            try await Task.sleep(for: .milliseconds(number % 5 == 0 ? 400 : 5))
            return Hummingbird.Response(status: .ok)
        }
    }
}

extension NIOLockedValueBox where Value == Int {
    /// Counts one more request and returns its number, from 1.
    func next() -> Int {
        withLockedValue { count in
            count += 1
            return count
        }
    }
}

/// Prints each resilience event as it happens.
struct PrintedResilienceEvents: ClientEventMonitor {
    func resilienceEvent(_ event: ResilienceEvent, for request: Trellis.Request) {
        switch event {
        case .circuitOpened(_, _, let detail): print("  event: circuit opened (\(detail))")
        case .callRefused(let refusal): print("  event: refused, \(refusal.reason)")
        case .retryRefusedByBudget(_, let tokens): print("  event: retry refused by the budget (\(tokens) tokens)")
        case .hedgeSent(_, let after): print("  event: hedge sent after \(inMilliseconds(after))")
        case .coalesced, .concurrencyLimitReached, .waitedForBackoff: break  // many of them: counted below instead
        default: print("  event: \(event.name)")
        }
    }
}

func resilienceTour(_ baseURL: URL) async throws {
    step("A flaky dependency: retries on a budget, and a circuit breaker that fails fast")
    let inventory = Client(baseURL: baseURL) {
        $0.retry = RetryPolicy(maximumRetries: 2, initialDelay: .milliseconds(20))
        $0.resilience.retryBudget = RetryBudget(maximumTokens: 6)
        $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(4), coolDown: .milliseconds(500))
        $0.observability.eventMonitors = [PrintedResilienceEvents()]
    }
    let stock = try Trellis.Request(method: .get, url: baseURL.appending(path: "inventory"))
    for call in 1...3 {
        do {
            _ = try await inventory.data(for: stock)
        } catch TrellisError.callRefused(let refusal) {
            print("  call \(call): \(refusal)")
        } catch {
            print("  call \(call): \(error)")
        }
    }
    try await Task.sleep(for: .milliseconds(600))
    let recovered = try await inventory.data(for: stock)
    print("  after the cool-down, a probe: \(recovered.status.code) \"\(String(decoding: recovered.body, as: UTF8.self))\"")

    step("One 429 with Retry-After: 1 pauses every caller, not only the one that got it")
    let rateLimited = Client(baseURL: baseURL) { $0.resilience.sharedBackoff = SharedBackoff() }
    let quota = try Trellis.Request(method: .get, url: baseURL.appending(path: "quota"))
    _ = try? await rateLimited.data(for: quota)
    let started = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<10 { group.addTask { _ = try await rateLimited.data(for: quota) } }
        try await group.waitForAll()
    }
    print("  10 concurrent calls answered after \(inMilliseconds(ContinuousClock.now - started))")

    step("Coalescing: 50 identical GETs at once share one request")
    let shared = Client(baseURL: baseURL) { $0.resilience.coalescing = Coalescing() }
    let catalogue = try Trellis.Request(method: .get, url: baseURL.appending(path: "catalogue"))
    let bodies = try await withThrowingTaskGroup(of: String.self) { group in
        for _ in 0..<50 { group.addTask { String(decoding: try await shared.data(for: catalogue).body, as: UTF8.self) } }
        return try await group.reduce(into: Set<String>()) { $0.insert($1) }
    }
    print("  50 callers, answers seen: \(bodies.sorted())")

    step("A client-side rate limit: 20 calls at once under 50 a second, 5 at once after a quiet spell")
    let metered = Client(baseURL: baseURL) {
        $0.resilience.rateLimit = RateLimit(requests: 50, per: .seconds(1), burst: 5)
    }
    let meter = try Trellis.Request(method: .get, url: baseURL.appending(path: "metered"))
    let meteredStart = ContinuousClock.now
    let answered = try await withThrowingTaskGroup(of: Duration.self) { group in
        for _ in 0..<20 { group.addTask { _ = try await metered.data(for: meter); return .now - meteredStart } }
        return try await group.reduce(into: [Duration]()) { $0.append($1) }.sorted()
    }
    print("  the first 5 answered within \(inMilliseconds(answered[4])), the last after \(inMilliseconds(answered[19])) (one every 20 ms after the burst)")

    step("Hedging: a second attempt when the first is slower than usual")
    let hedged = Client(baseURL: baseURL) {
        $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(50)))
        $0.observability.eventMonitors = [PrintedResilienceEvents()]
    }
    let search = try Trellis.Request(method: .get, url: baseURL.appending(path: "search"))
    var slowest = Duration.zero
    for _ in 0..<8 {
        let call = ContinuousClock.now
        _ = try await hedged.data(for: search)
        slowest = max(slowest, .now - call)
    }
    print("  8 searches, the slowest in \(inMilliseconds(slowest)) (the server's slow answers take 400 ms)")
}

/// `duration` in whole milliseconds, for the tour's lines.
func inMilliseconds(_ duration: Duration) -> String {
    "\(Int(duration / .milliseconds(1))) ms"
}
