import AsyncHTTPClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import MallocInterposerSwift
import NIOCore
import NIOFoundationCompat
import Trellis

struct Article: Codable, Sendable {
    var id: Int
    var title: String
    var author: String
    var tags: [String]
    var published: Bool
    var score: Double
}

struct NewArticle: Codable, Sendable {
    var title: String
    var author: String
    var tags: [String]
}

@Service
protocol Articles {
    @GET("/article")
    func article() async throws -> Article

    @GET("/articles")
    func articles() async throws -> [Article]

    @GET("/some-articles")
    func someArticles() async throws -> [Article]

    @POST("/articles") @Body("article")
    func create(article: NewArticle) async throws -> Article
}

/// What the server answers: a 199-byte article, about 100 KB of articles (and 23 KB of them),
/// and a created one.
enum ArticleFixtures {
    static let article = Article(
        id: 42, title: "Declaring HTTP APIs as Swift protocols", author: "Ada Lovelace",
        tags: ["swift", "http", "macros"], published: true, score: 4.75
    )
    static let articleBody = ByteBuffer(data: try! JSONEncoder().encode(article))
    static let articlesBody = ByteBuffer(data: try! JSONEncoder().encode(
        (0..<700).map { Article(id: $0, title: "Article number \($0) about HTTP", author: "Author \($0 % 17)", tags: ["a", "b"], published: $0 % 2 == 0, score: Double($0) / 7) }
    ))
    static let someArticlesBody = ByteBuffer(data: try! JSONEncoder().encode(
        (0..<160).map { Article(id: $0, title: "Article number \($0) about HTTP", author: "Author \($0 % 17)", tags: ["a", "b"], published: $0 % 2 == 0, score: Double($0) / 7) }
    ))
    static let newArticle = NewArticle(title: "Posted", author: "Grace Hopper", tags: ["new"])

    static func install(_ router: Router<BasicRequestContext>) {
        router.get("article") { _, _ in json(articleBody) }
        router.get("articles") { _, _ in json(articlesBody) }
        router.get("some-articles") { _, _ in json(someArticlesBody) }
        router.post("articles") { request, _ in
            var request = request
            _ = try await request.collectBody(upTo: 1 << 20)
            return json(articleBody, status: .created)
        }
    }

    static func json(_ body: ByteBuffer, status: HTTPResponse.Status = .ok) -> Hummingbird.Response {
        Hummingbird.Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    }
}

/// Throughput, latency and allocations of one way of making a call.
struct CallFigures {
    var requestsPerSecond: Double
    var p50: Double
    var p99: Double
    var allocations: Double
    /// CPU time the whole process spent per call, in microseconds (client and in-process
    /// server alike): steadier than throughput on a shared machine.
    var cpuPerCall: Double
}

struct CallRow {
    var name: String
    var raw: CallFigures
    var trellis: CallFigures
}

/// A macro-generated service call next to the same request made by hand with the raw
/// transport and `JSONDecoder`.
enum CallBenchmark {
    typealias Call = @Sendable () async throws -> Void

    struct Scenario {
        var name: String
        var concurrency: Int
        var requests: Int
        var raw: Call
        var trellis: Call
    }

    static func run(transport kind: String, rounds: Int) async throws -> [CallRow] {
        try await withServer(.calls) { url in
            let scenarios = kind == "urlsession" ? urlSessionScenarios(url) : asyncHTTPClientScenarios(url)
            if let profiled = ProcessInfo.processInfo.environment["TRELLIS_BENCH_PROFILE"] {
                try await profile(profiled, scenarios)
                return []
            }
            // `TRELLIS_BENCH_CASES=1,5`: only those cases (numbered from 0), for a quicker A/B.
            let chosen = ProcessInfo.processInfo.environment["TRELLIS_BENCH_CASES"].map { Set($0.split(separator: ",").compactMap { Int($0) }) }
            var rows: [CallRow] = []
            for (index, scenario) in scenarios.enumerated() where chosen?.contains(index) ?? true {
                rows.append(try await measure(scenario, rounds: rounds))
            }
            return rows
        }
    }

    /// `TRELLIS_BENCH_RESILIENCE=idle`: the Trellis side with every resilience policy on, none
    /// of which ever acts on these calls; `idle-uncoalesced`: all but coalescing, which would
    /// share the concurrent cases' identical GETs; or a list of some of `budget`, `breaker`,
    /// `limit`, `backoff`, `hedging`, `coalescing` and `ratelimit` (a rate limit far above what
    /// the cases send), joined by `,` or `+` (`+` within an
    /// `alternate-runs` setting, whose own separator is `,`). Unset: none, the default.
    static var idleResilience: Client.Configuration.Resilience {
        let setting = ProcessInfo.processInfo.environment["TRELLIS_BENCH_RESILIENCE"] ?? ""
        var names = Set(setting.split(whereSeparator: { $0 == "," || $0 == "+" }).map(String.init))
        if setting == "idle" || setting == "idle-uncoalesced" {
            names = ["budget", "breaker", "limit", "backoff", "hedging"]
            if setting == "idle" { names.insert("coalescing") }
        }
        return .init(
            retryBudget: names.contains("budget") ? RetryBudget() : nil,
            circuitBreaker: names.contains("breaker") ? CircuitBreaker() : nil,
            concurrencyLimit: names.contains("limit") ? ConcurrencyLimit(maximumInFlight: 1000) : nil,
            sharedBackoff: names.contains("backoff") ? SharedBackoff() : nil,
            hedging: names.contains("hedging") ? Hedging(after: .fixed(.seconds(10))) : nil,
            coalescing: names.contains("coalescing") ? Coalescing() : nil,
            rateLimit: names.contains("ratelimit") ? RateLimit(requests: 100_000_000, per: .seconds(1)) : nil
        )
    }

    /// `TRELLIS_BENCH_HAR=1`: the Trellis side records its session as HAR in memory (an
    /// ``HTTPArchiveMonitor`` writing no file), for the cost of seeing a session;
    /// `TRELLIS_BENCH_HAR=monitor`: a monitor that does nothing, for the cost of observing
    /// calls at all.
    private static var sessionRecording: [any ClientEventMonitor] {
        switch ProcessInfo.processInfo.environment["TRELLIS_BENCH_HAR"] {
        case "1": [HTTPArchiveMonitor()]
        case "monitor": [IdleMonitor()]
        default: []
        }
    }

    /// A monitor that implements nothing.
    private struct IdleMonitor: ClientEventMonitor {}

    private static func asyncHTTPClientScenarios(_ url: URL) -> [Scenario] {
        let transport = LoopPairing.shared.map(\.transport) ?? AsyncHTTPClientTransport.shared
        let http = transport.httpClient
        let service = ArticlesService(client: Client(baseURL: url, transport: transport) {
            $0.resilience = idleResilience
            $0.observability.eventMonitors = sessionRecording
        })
        let decoder = JSONDecoder()
        let encoder = JSONEncoder()
        let base = url.absoluteString
        // `TRELLIS_BENCH_RAW_API=delegate`: the raw GETs go through AsyncHTTPClient's delegate
        // API (its `ResponseAccumulator`), the API Trellis's buffered GETs use, instead of the
        // async API; the two APIs' costs, told apart from the library's.
        let rawThroughDelegate = ProcessInfo.processInfo.environment["TRELLIS_BENCH_RAW_API"] == "delegate"
        // The raw calls send what the service sends: Trellis asks for a compressed answer by
        // default, and the server reads that field whoever sends it.
        @Sendable func get<Value: Decodable & SendableMetatype>(_ path: String, as type: Value.Type) async throws {
            if rawThroughDelegate {
                var request = try HTTPClient.Request(url: base + path)
                request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
                let task = http.execute(request: request, delegate: ResponseAccumulator(request: request), deadline: .now() + .seconds(60))
                let response = try await task.futureResult.get()
                guard response.status == .ok, let body = response.body else { throw BenchmarkFailure(description: "status \(response.status)") }
                _ = try decoder.decode(Value.self, from: body)
                return
            }
            var request = HTTPClientRequest(url: base + path)
            request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
            let response = try await http.execute(request, timeout: .seconds(60))
            guard response.status == .ok else { throw BenchmarkFailure(description: "status \(response.status)") }
            let body = try await response.body.collect(upTo: 64 << 20)
            _ = try decoder.decode(Value.self, from: body)
        }
        @Sendable func post() async throws {
            var request = HTTPClientRequest(url: base + "/articles")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
            request.body = .bytes(ByteBuffer(data: try encoder.encode(ArticleFixtures.newArticle)))
            let response = try await http.execute(request, timeout: .seconds(60))
            guard response.status == .created else { throw BenchmarkFailure(description: "status \(response.status)") }
            _ = try decoder.decode(Article.self, from: try await response.body.collect(upTo: 64 << 20))
        }
        return scenarios(
            rawSmall: { try await get("/article", as: Article.self) },
            rawLarge: { try await get("/articles", as: [Article].self) },
            rawPost: post,
            service: service
        )
    }

    private static func urlSessionScenarios(_ url: URL) -> [Scenario] {
        let session = URLSession(configuration: .default)
        let service = ArticlesService(client: Client(baseURL: url, transport: URLSessionTransport()))
        let decoder = JSONDecoder()
        let encoder = JSONEncoder()
        @Sendable func load(_ request: URLRequest, expecting status: Int) async throws -> Data {
            try await withCheckedThrowingContinuation { continuation in
                session.dataTask(with: request) { data, response, error in
                    if let error { return continuation.resume(throwing: error) }
                    guard (response as? HTTPURLResponse)?.statusCode == status, let data else {
                        return continuation.resume(throwing: BenchmarkFailure(description: "unexpected response"))
                    }
                    continuation.resume(returning: data)
                }.resume()
            }
        }
        @Sendable func get<Value: Decodable & SendableMetatype>(_ path: String, as type: Value.Type) async throws {
            _ = try decoder.decode(Value.self, from: try await load(URLRequest(url: url.appending(path: path)), expecting: 200))
        }
        @Sendable func post() async throws {
            var request = URLRequest(url: url.appending(path: "articles"))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try encoder.encode(ArticleFixtures.newArticle)
            _ = try decoder.decode(Article.self, from: try await load(request, expecting: 201))
        }
        return scenarios(
            rawSmall: { try await get("article", as: Article.self) },
            rawLarge: { try await get("articles", as: [Article].self) },
            rawPost: post,
            service: service
        )
    }

    private static func scenarios(rawSmall: @escaping Call, rawLarge: @escaping Call, rawPost: @escaping Call, service: ArticlesService) -> [Scenario] {
        let small: Call = { _ = try await service.article() }
        let large: Call = { _ = try await service.articles() }
        let post: Call = { _ = try await service.create(article: ArticleFixtures.newArticle) }
        return [
            Scenario(name: "GET 199 B, sequential", concurrency: 1, requests: 1_000, raw: rawSmall, trellis: small),
            Scenario(name: "GET 199 B, concurrency 32", concurrency: 32, requests: 6_400, raw: rawSmall, trellis: small),
            Scenario(name: "GET 100 KB, sequential", concurrency: 1, requests: 200, raw: rawLarge, trellis: large),
            Scenario(name: "GET 100 KB, concurrency 32", concurrency: 32, requests: 640, raw: rawLarge, trellis: large),
            Scenario(name: "POST JSON, sequential", concurrency: 1, requests: 1_000, raw: rawPost, trellis: post),
            Scenario(name: "POST JSON, concurrency 32", concurrency: 32, requests: 6_400, raw: rawPost, trellis: post),
        ]
    }

    /// `TRELLIS_BENCH_PROFILE=<case number>:<raw|trellis>`: one side of one case, run over and
    /// over with nothing else (`TRELLIS_BENCH_PROFILE_ROUNDS` times, 10 unless set), for a
    /// profiler (`perf record --call-graph dwarf`) to look at. Valgrind 3.19 cannot read these
    /// binaries' DWARF 5.
    ///
    /// `raw+trellis` runs both sides in rounds as the tables do (slices taking turns, see
    /// `interleavedRound`) and prints each round's throughput, CPU time per call and latency
    /// spread (as does `TRELLIS_BENCH_VERBOSE=1` with one side): to see whether a side costs
    /// the same alone as beside the other, and to compare two builds round by round.
    ///
    /// `TRELLIS_BENCH_PROFILE_PRELUDE=<n>` makes `n` raw calls of case 0, one after another,
    /// before the profiled case: what the case sees in a full run, where case 0 comes first.
    /// `TRELLIS_BENCH_PROFILE_PRELUDE=<n>@<case>` runs `n` rounds of that case instead (both
    /// sides, in slices as the tables do): what a concurrent case leaves to the one after it.
    static func profile(_ choice: String, _ scenarios: [Scenario]) async throws {
        let parts = choice.split(separator: ":")
        let sides = parts.count == 2 ? parts[1].split(separator: "+") : []
        guard parts.count == 2, let index = Int(parts[0]), scenarios.indices.contains(index),
            !sides.isEmpty, sides.allSatisfy({ $0 == "raw" || $0 == "trellis" })
        else {
            throw BenchmarkFailure(description: "TRELLIS_BENCH_PROFILE wants <case number 0-\(scenarios.count - 1)>:<raw|trellis|raw+trellis>")
        }
        let scenario = scenarios[index]
        // A sequential call before a concurrent case changes how the case compares (see
        // Benchmarks/README.md, "What one call before a case does").
        let prelude = (ProcessInfo.processInfo.environment["TRELLIS_BENCH_PROFILE_PRELUDE"] ?? "").split(separator: "@")
        if let count = prelude.first.flatMap({ Int($0) }) {
            if prelude.count == 2, let before = Int(prelude[1]), scenarios.indices.contains(before) {
                for _ in 0..<count { _ = try await interleavedRound(scenarios[before], rawFirst: true) }
            } else {
                for _ in 0..<count { try await scenarios[0].raw() }
            }
        }
        let rounds = Int(ProcessInfo.processInfo.environment["TRELLIS_BENCH_PROFILE_ROUNDS"] ?? "") ?? 10
        LoopPairing.shared?.resetCounts()
        defer { LoopPairing.shared.map { Swift.print("connections of the profiled rounds:\n" + $0.report()) } }
        for round in 0..<rounds {
            let runs: [(String, Run)]
            if sides.count > 1 {
                let (raw, trellis) = try await interleavedRound(scenario, rawFirst: round % 2 == 0)
                runs = [("raw", raw), ("trellis", trellis)]
            } else {
                runs = [(String(sides[0]), try await timed(sides[0] == "raw" ? scenario.raw : scenario.trellis, scenario))]
            }
            guard sides.count > 1 || ProcessInfo.processInfo.environment["TRELLIS_BENCH_VERBOSE"] != nil else { continue }
            for (side, run) in runs {
                // The latency spread shows whether a side is slower on every call or on a few.
                let spread = [0.5, 0.9, 0.99, 1].map { String(format: "%.3f", percentile(run.latencies, $0)) }.joined(separator: " / ")
                let mean = run.latencies.reduce(0, +) / Double(max(run.latencies.count, 1))
                Swift.print(
                    "round \(round) \(side): \(Int(run.requestsPerSecond)) req/s, \(Int(run.cpuPerCall)) µs CPU/call, "
                        + String(format: "mean %.3f ms, ", mean) + "p50 / p90 / p99 / max \(spread) ms"
                )
            }
        }
        Swift.print("profiled \(parts[1]) \(scenario.name)")
    }

    /// One side's calls in a round: how long they took, wall and CPU, and each one's latency.
    private struct Run {
        var seconds: Double = 0
        var cpuSeconds: Double = 0
        var latencies: [Double] = []

        var requestsPerSecond: Double { seconds > 0 ? Double(latencies.count) / seconds : 0 }
        var cpuPerCall: Double { latencies.isEmpty ? 0 : cpuSeconds * 1e6 / Double(latencies.count) }

        mutating func add(_ slice: Run) {
            seconds += slice.seconds
            cpuSeconds += slice.cpuSeconds
            latencies += slice.latencies
        }
    }

    static func measure(_ scenario: Scenario, rounds: Int) async throws -> CallRow {
        // Warm both up: connections, caches, lazily initialised code.
        _ = try await timed(scenario.raw, scenario)
        _ = try await timed(scenario.trellis, scenario)
        var raw: [Run] = []
        var trellis: [Run] = []
        for round in 0..<rounds {
            let (rawRun, trellisRun) = try await interleavedRound(scenario, rawFirst: round % 2 == 0)
            raw.append(rawRun)
            trellis.append(trellisRun)
        }
        return CallRow(
            name: scenario.name,
            raw: figures(raw, allocations: try await allocations(scenario.raw)),
            trellis: figures(trellis, allocations: try await allocations(scenario.trellis))
        )
    }

    /// `TRELLIS_BENCH_SLICE_LOG=1` prints when each slice of a round began and ended, on the
    /// monotonic clock, to standard error.
    private static let logsSlices = ProcessInfo.processInfo.environment["TRELLIS_BENCH_SLICE_LOG"] != nil

    private static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// One round of both sides, cut into slices that take turns (raw, Trellis, Trellis, raw,
    /// …), each side's figures summed over its slices.
    ///
    /// The load of a shared machine changes from one second to the next. A round of one side
    /// and then one of the other (a second or two each) put such a change on one side only,
    /// and a single run's ratio moved by several percent. Slices of a tenth of a round, in
    /// mirrored order, spread it over both sides alike. `TRELLIS_BENCH_SLICES=1` runs each side
    /// whole instead.
    private static func interleavedRound(_ scenario: Scenario, rawFirst: Bool) async throws -> (raw: Run, trellis: Run) {
        let perWorker = scenario.requests / scenario.concurrency
        let wanted = Int(ProcessInfo.processInfo.environment["TRELLIS_BENCH_SLICES"] ?? "") ?? 10
        // At least four calls per task in a slice: every slice waits for its slowest task, and
        // a slice of one or two calls each would mostly measure that wait.
        let slices = max(1, min(wanted, perWorker / 4))
        var raw = Run()
        var trellis = Run()
        for slice in 0..<slices {
            let calls = perWorker / slices + (slice < perWorker % slices ? 1 : 0)
            let rawNow = (slice % 4 == 0 || slice % 4 == 3) == rawFirst
            for side in rawNow ? [true, false] : [false, true] {
                let began = monotonicNanoseconds()
                if side {
                    raw.add(try await timed(scenario.raw, scenario, callsPerTask: calls))
                } else {
                    trellis.add(try await timed(scenario.trellis, scenario, callsPerTask: calls))
                }
                if logsSlices {
                    // For a profile of both sides at once: `perf record -k CLOCK_MONOTONIC` stamps
                    // samples on the same clock, so each sample can be given to its side.
                    FileHandle.standardError.write(Data("slice \(side ? "raw" : "trellis") \(began) \(monotonicNanoseconds())\n".utf8))
                }
            }
        }
        return (raw, trellis)
    }

    private static func figures(_ runs: [Run], allocations: Double) -> CallFigures {
        CallFigures(
            requestsPerSecond: median(runs.map(\.requestsPerSecond)),
            p50: median(runs.map { percentile($0.latencies, 0.50) }),
            p99: median(runs.map { percentile($0.latencies, 0.99) }),
            allocations: allocations,
            cpuPerCall: median(runs.map(\.cpuPerCall))
        )
    }

    private static func timed(_ call: @escaping Call, _ scenario: Scenario, callsPerTask: Int? = nil) async throws -> Run {
        let perWorker = callsPerTask ?? scenario.requests / scenario.concurrency
        let start = ContinuousClock.now
        let cpuBefore = processCPUTime()
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for _ in 0..<scenario.concurrency {
                group.addTask {
                    var latencies: [Double] = []
                    latencies.reserveCapacity(perWorker)
                    let clock = ContinuousClock()
                    for _ in 0..<perWorker {
                        let began = clock.now
                        try await call()
                        latencies.append(milliseconds(clock.now - began))
                    }
                    return latencies
                }
            }
            return try await group.reduce(into: [Double]()) { $0 += $1 }
        }
        return Run(
            seconds: milliseconds(ContinuousClock.now - start) / 1e3,
            cpuSeconds: processCPUTime() - cpuBefore,
            latencies: latencies
        )
    }

    private static func processCPUTime() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Allocations per call in the whole process (client and in-process server alike, so the
    /// difference between two ways of calling is what the client adds).
    private static func allocations(_ call: Call) async throws -> Double {
        let calls = 200
        MallocInterposerSwift.initialize()
        MallocInterposerSwift.hook()
        for _ in 0..<calls { try await call() }
        MallocInterposerSwift.unhook()
        return Double(MallocInterposerSwift.getStatistics().mallocCount) / Double(calls)
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
    }

    private static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }

    static func print(_ title: String, _ rows: [CallRow]) {
        Swift.print("\n\(title)")
        let header = ["case", "raw req/s", "Trellis req/s", "ratio", "raw p50", "Trellis p50", "raw p99", "Trellis p99", "p99 ratio", "raw allocs", "Trellis allocs", "extra allocs", "raw CPU/call", "Trellis CPU/call", "CPU ratio"]
        let lines = rows.map { row -> [String] in
            [
                row.name,
                String(format: "%.0f", row.raw.requestsPerSecond), String(format: "%.0f", row.trellis.requestsPerSecond),
                String(format: "%.2fx", row.trellis.requestsPerSecond / row.raw.requestsPerSecond),
                String(format: "%.3f ms", row.raw.p50), String(format: "%.3f ms", row.trellis.p50),
                String(format: "%.3f ms", row.raw.p99), String(format: "%.3f ms", row.trellis.p99),
                String(format: "%.2fx", row.trellis.p99 / row.raw.p99),
                String(format: "%.0f", row.raw.allocations), String(format: "%.0f", row.trellis.allocations),
                String(format: "%+.0f", row.trellis.allocations - row.raw.allocations),
                String(format: "%.0f µs", row.raw.cpuPerCall), String(format: "%.0f µs", row.trellis.cpuPerCall),
                String(format: "%.2fx", row.trellis.cpuPerCall / row.raw.cpuPerCall),
            ]
        }
        Report.table(header, lines)
    }
}
