import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import Trellis

/// What the client and its pipeline cost a call by themselves: a service call over a transport
/// that answers at once, next to decoding the same body with `JSONDecoder`, which is what the
/// raw call does apart from the network. One task, no server and no sockets, so the figure
/// holds still where the network's noise would hide a few microseconds.
///
/// The transport answers at once and ignores the exchange's limits: what is measured is the
/// pipeline alone.
enum PipelineBenchmark {
    struct InstantTransport: Transport {
        let body = ArticleFixtures.articleBody

        func send(_ request: Trellis.Request, within limits: ExchangeLimits) async throws -> Trellis.Response<ResponseBody> {
            Trellis.Response(head: HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), body: ResponseBody(body))
        }
    }

    static let calls = 100_000

    /// A middleware that passes every request on: `TRELLIS_BENCH_PASSING=N` puts N of them in
    /// the pipeline, for what a stage costs by being there.
    struct Passing: Middleware {
        func intercept(_ request: Trellis.Request, next: @Sendable (Trellis.Request) async throws -> Trellis.Response<ResponseBody>) async throws -> Trellis.Response<ResponseBody> {
            try await next(request)
        }
    }

    static func run(rounds: Int) async throws -> [[String]] {
        // `TRELLIS_BENCH_RESILIENCE` as for the calls suite: the policies' cost without the network.
        let passing = Int(ProcessInfo.processInfo.environment["TRELLIS_BENCH_PASSING"] ?? "") ?? 0
        let client = Client(baseURL: URL(string: "http://127.0.0.1:8080")!, transport: InstantTransport(), middlewares: Array(repeating: Passing(), count: passing)) {
            $0.resilience = CallBenchmark.idleResilience
        }
        let service = ArticlesService(client: client)
        let decoder = JSONDecoder()
        let body = ArticleFixtures.articleBody
        let raw: @Sendable () async throws -> Void = { _ = try decoder.decode(Article.self, from: body) }
        let trellis: @Sendable () async throws -> Void = { _ = try await service.article() }
        // The POST's raw side encodes the new article and decodes the answer, as the raw call does.
        let encoder = JSONEncoder()
        let rawPost: @Sendable () async throws -> Void = {
            _ = ByteBuffer(data: try encoder.encode(ArticleFixtures.newArticle))
            _ = try decoder.decode(Article.self, from: body)
        }
        let post: @Sendable () async throws -> Void = { _ = try await service.create(article: ArticleFixtures.newArticle) }
        // `TRELLIS_BENCH_PROFILE=<raw|trellis|raw-post|trellis-post>`: that side alone, for a profiler.
        if let profiled = ProcessInfo.processInfo.environment["TRELLIS_BENCH_PROFILE"] {
            let sides = ["raw": raw, "trellis": trellis, "raw-post": rawPost, "trellis-post": post]
            guard let call = sides[profiled] else {
                throw BenchmarkFailure(description: "TRELLIS_BENCH_PROFILE wants raw, trellis, raw-post or trellis-post for the pipeline suite")
            }
            for _ in 0..<rounds { _ = try await nanosecondsPerCall(call) }
            return []
        }
        let get = try await pair(raw, trellis, rounds: rounds)
        let created = try await pair(rawPost, post, rounds: rounds)
        return [
            ["GET: JSONDecoder alone", String(format: "%.0f ns", get.raw)],
            ["GET: service call, instant transport", String(format: "%.0f ns", get.call)],
            ["GET: client and pipeline", String(format: "%.0f ns", get.call - get.raw)],
            ["POST: JSONEncoder and JSONDecoder alone", String(format: "%.0f ns", created.raw)],
            ["POST: service call, instant transport", String(format: "%.0f ns", created.call)],
            ["POST: client and pipeline", String(format: "%.0f ns", created.call - created.raw)],
        ]
    }

    /// The median time per call of each side, run in turn.
    private static func pair(
        _ raw: @escaping @Sendable () async throws -> Void,
        _ trellis: @escaping @Sendable () async throws -> Void,
        rounds: Int
    ) async throws -> (raw: Double, call: Double) {
        _ = try await nanosecondsPerCall(raw)
        _ = try await nanosecondsPerCall(trellis)
        var rawRuns: [Double] = []
        var trellisRuns: [Double] = []
        for round in 0..<rounds {
            if round % 2 == 0 {
                rawRuns.append(try await nanosecondsPerCall(raw))
                trellisRuns.append(try await nanosecondsPerCall(trellis))
            } else {
                trellisRuns.append(try await nanosecondsPerCall(trellis))
                rawRuns.append(try await nanosecondsPerCall(raw))
            }
        }
        return (median(rawRuns), median(trellisRuns))
    }

    /// `TRELLIS_BENCH_TASKS=<n>` runs the calls from `n` tasks at once, each making all of them:
    /// what the client's shared state (its objects' reference counts, its locks) costs when
    /// several cores use it. The figure is then each task's time per call.
    private static let tasks = max(1, Int(ProcessInfo.processInfo.environment["TRELLIS_BENCH_TASKS"] ?? "") ?? 1)

    private static func nanosecondsPerCall(_ call: @escaping @Sendable () async throws -> Void) async throws -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<tasks {
                group.addTask { for _ in 0..<calls { try await call() } }
            }
            try await group.waitForAll()
        }
        let elapsed = clock.now - start
        return (Double(elapsed.components.seconds) * 1e18 + Double(elapsed.components.attoseconds)) / 1e9 / Double(calls)
    }
}
