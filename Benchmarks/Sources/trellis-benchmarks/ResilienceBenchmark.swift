import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Trellis

/// The resilience policies where they act: hedging against a server with a slow tail, and the
/// price of a call an open circuit refuses.
enum ResilienceBenchmark {
    /// Sequential GETs per hedging case.
    static let calls = 400
    /// Calls refused by an open circuit, timed together.
    static let refusals = 200_000

    /// `/tail/<ms>`: answers after `ms` milliseconds, but 1 request in 20 (by arrival) after
    /// 500 ms. `/broken`: 500.
    static func install(_ router: Router<BasicRequestContext>) {
        let arrivals = NIOLockedValueBox(0)
        router.get("tail/:milliseconds") { _, context -> Hummingbird.Response in
            let number = arrivals.withLockedValue { count in
                count += 1
                return count
            }
            let usual = context.parameters.get("milliseconds", as: Int.self) ?? 0
            if number % 20 == 0 {
                try await Task.sleep(for: .milliseconds(500))
            } else if usual > 0 {
                try await Task.sleep(for: .milliseconds(usual))
            }
            return Hummingbird.Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "ok")))
        }
        router.get("broken") { _, _ in Hummingbird.Response(status: .internalServerError) }
    }

    static func run(rounds: Int) async throws -> [Row] {
        try await withServer(install) { url in
            var rows: [Row] = []
            // `TRELLIS_BENCH_PROFILE=refusals`: the open circuit's refusals alone, for a profiler.
            let onlyRefusals = ProcessInfo.processInfo.environment["TRELLIS_BENCH_PROFILE"] == "refusals"
            for usual in onlyRefusals ? [] : [0, 5] {
                let request = try Trellis.Request(method: .get, url: url.appending(path: "tail/\(usual)"))
                let server = usual == 0 ? "answers at once" : "answers in \(usual) ms"
                let unhedged = try await latencies(of: Client(baseURL: url), request)
                rows.append(Row(
                    name: "\(server), no hedging: p99 over median", baseline: "median", baselineValue: unhedged.median * 1e3,
                    value: unhedged.p99 * 1e3, unit: "ms", note: "\(calls) GETs, 1 in 20 answered after 500 ms"
                ))
                var delays: [(String, Hedging.Delay)] = [("the p90", .percentile(0.9, initially: .milliseconds(5))), ("the p50", .percentile(0.5, initially: .milliseconds(5)))]
                // Under 2x the median takes a delay under the median: half of it here.
                if usual > 0 { delays.append(("\(Double(usual) / 2) ms", .fixed(.microseconds(usual * 500)))) }
                for (name, delay) in delays {
                    let counter = HedgeCounter()
                    let hedged = Client(baseURL: url) {
                        $0.resilience.hedging = Hedging(after: delay)
                        $0.observability.eventMonitors = [counter]
                    }
                    // The first calls teach the client the origin's latencies.
                    _ = try await latencies(of: hedged, request)
                    counter.reset()
                    let figures = try await latencies(of: hedged, request)
                    rows.append(Row(
                        name: "\(server), hedged after \(name): p99 over median", baseline: "median", baselineValue: figures.median * 1e3,
                        value: figures.p99 * 1e3, unit: "ms",
                        note: String(format: "%.0f%% of calls hedged", Double(counter.count) * 100 / Double(calls))
                    ))
                }
            }

            // An open circuit: the call fails before it reaches the transport.
            let breaking = Client(baseURL: url) {
                $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(1), coolDown: .seconds(3600))
            }
            let broken = try Trellis.Request(method: .get, url: url.appending(path: "broken"))
            _ = try? await breaking.data(for: broken)
            // The floor it is compared with: the same call failed by the transport at once.
            let failing = Client(baseURL: url, transport: FailingTransport())
            // And the floor of any call that fails: one its first middleware fails, before any
            // of the client's stages but the call's observation has run.
            let stopped = Client(baseURL: url, middlewares: [FailingMiddleware()])
            var refused = Double.infinity
            var failed = Double.infinity
            var failedFirst = Double.infinity
            for _ in 0..<max(1, rounds) {
                refused = min(refused, try await microseconds { _ = try await breaking.data(for: broken) })
                if onlyRefusals { continue }
                failed = min(failed, try await microseconds { _ = try await failing.data(for: broken) })
                failedFirst = min(failedFirst, try await microseconds { _ = try await stopped.data(for: broken) })
            }
            rows.append(Row(
                name: "a call refused by an open circuit", baseline: "failed by the transport", baselineValue: failed,
                value: refused, unit: "µs", note: "client.data(for:) to its error; best of \(max(1, rounds)) runs of \(refusals)"
            ))
            rows.append(Row(
                name: "a call refused by an open circuit", baseline: "failed by its first middleware", baselineValue: failedFirst,
                value: refused, unit: "µs", note: "the same runs"
            ))
            return rows
        }
    }

    /// Microseconds per call of `call`, which must throw, over `refusals` calls.
    private static func microseconds(_ call: () async throws -> Void) async throws -> Double {
        let started = ContinuousClock.now
        for _ in 0..<refusals {
            do {
                try await call()
                throw BenchmarkFailure(description: "a call that should fail went through")
            } catch is TrellisError {}
        }
        return (ContinuousClock.now - started) / .microseconds(1) / Double(refusals)
    }

    /// The median and 99th percentile, in seconds, of `calls` sequential GETs.
    private static func latencies(of client: Client, _ request: Trellis.Request) async throws -> (median: Double, p99: Double) {
        var samples: [Double] = []
        for _ in 0..<calls {
            let started = ContinuousClock.now
            _ = try await client.data(for: request)
            samples.append((ContinuousClock.now - started) / .seconds(1))
        }
        samples.sort()
        func percentile(_ share: Double) -> Double { samples[min(samples.count, max(1, Int((Double(samples.count) * share).rounded(.up)))) - 1] }
        return (percentile(0.5), percentile(0.99))
    }
}

/// Counts the hedges a client sends.
private final class HedgeCounter: ClientEventMonitor {
    private let hedges = NIOLockedValueBox(0)

    var count: Int { hedges.withLockedValue { $0 } }

    func reset() { hedges.withLockedValue { $0 = 0 } }

    func resilienceEvent(_ event: ResilienceEvent, for request: Trellis.Request) {
        if case .hedgeSent = event { hedges.withLockedValue { $0 += 1 } }
    }
}

/// A transport that fails every request at once, as an unreachable server would: the floor of
/// a call that ends in an error.
private struct FailingTransport: Transport {
    func send(_ request: Trellis.Request, within limits: ExchangeLimits) async throws -> Trellis.Response<Trellis.ResponseBody> {
        throw TrellisError.connectionFailed(ConnectionFailure(host: "127.0.0.1", reason: "refused"))
    }
}

/// A middleware that fails every call before passing it on: the floor of a call that ends in
/// an error, with no stage of the client at work but the observation check.
private struct FailingMiddleware: Middleware {
    func intercept(
        _ request: Trellis.Request,
        next: @Sendable (Trellis.Request) async throws -> Trellis.Response<Trellis.ResponseBody>
    ) async throws -> Trellis.Response<Trellis.ResponseBody> {
        throw TrellisError.connectionFailed(ConnectionFailure(host: "127.0.0.1", reason: "refused"))
    }
}
