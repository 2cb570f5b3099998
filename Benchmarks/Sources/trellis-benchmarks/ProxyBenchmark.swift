import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Trellis

/// Calls through a local tinyproxy: Trellis next to raw AsyncHTTPClient given the same proxy.
///
/// AsyncHTTPClient tunnels every request (`CONNECT`), so the like-for-like rows give Trellis
/// the same route (`tunnelsPlainHTTP`). The forwarded rows show Trellis's default for
/// `http://` targets, a connection to the proxy per request, against that same tunnelled raw
/// client: they price the choice rather than the library.
enum ProxyBenchmark {
    static func run(rounds: Int) async throws -> [CallRow] {
        try await withServer(.calls) { url in
            try await withTinyproxy { proxyPort in
                var configuration = AsyncHTTPClientTransport.defaultConfiguration
                configuration.proxy = .server(host: "127.0.0.1", port: proxyPort)
                let raw = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
                let tunnelled = ArticlesService(client: Client(baseURL: url) {
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxyPort, tunnelsPlainHTTP: true))
                })
                let forwarded = ArticlesService(client: Client(baseURL: url) {
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxyPort))
                })
                let rawGet = rawCall(raw, url: url, post: false)
                let rawPost = rawCall(raw, url: url, post: true)
                let scenarios = [
                    CallBenchmark.Scenario(name: "GET 199 B, sequential, tunnelled", concurrency: 1, requests: 1_000, raw: rawGet,
                                           trellis: { _ = try await tunnelled.article() }),
                    CallBenchmark.Scenario(name: "GET 199 B, concurrency 8, tunnelled", concurrency: 8, requests: 2_400, raw: rawGet,
                                           trellis: { _ = try await tunnelled.article() }),
                    CallBenchmark.Scenario(name: "POST JSON, sequential, tunnelled", concurrency: 1, requests: 300, raw: rawPost,
                                           trellis: { _ = try await tunnelled.create(article: ArticleFixtures.newArticle) }),
                    CallBenchmark.Scenario(name: "POST JSON, concurrency 8, tunnelled", concurrency: 8, requests: 800, raw: rawPost,
                                           trellis: { _ = try await tunnelled.create(article: ArticleFixtures.newArticle) }),
                    CallBenchmark.Scenario(name: "GET 199 B, sequential, forwarded", concurrency: 1, requests: 300, raw: rawGet,
                                           trellis: { _ = try await forwarded.article() }),
                    CallBenchmark.Scenario(name: "POST JSON, sequential, forwarded", concurrency: 1, requests: 300, raw: rawPost,
                                           trellis: { _ = try await forwarded.create(article: ArticleFixtures.newArticle) }),
                ]
                let chosen = ProcessInfo.processInfo.environment["TRELLIS_BENCH_CASES"].map { Set($0.split(separator: ",").compactMap { Int($0) }) }
                var rows: [CallRow] = []
                for (index, scenario) in scenarios.enumerated() where chosen?.contains(index) ?? true {
                    rows.append(try await CallBenchmark.measure(scenario, rounds: rounds))
                }
                try await raw.shutdown()
                return rows
            }
        }
    }

    /// The raw call: what the service sends, through `client`, decoded with `JSONDecoder`.
    private static func rawCall(_ client: HTTPClient, url: URL, post: Bool) -> CallBenchmark.Call {
        let body = try! JSONEncoder().encode(ArticleFixtures.newArticle)
        return {
            var request = HTTPClientRequest(url: url.absoluteString + (post ? "/articles" : "/article"))
            request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
            if post {
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(data: body))
            }
            let response = try await client.execute(request, timeout: .seconds(60))
            guard response.status == (post ? .created : .ok) else { throw BenchmarkFailure(description: "status \(response.status)") }
            _ = try JSONDecoder().decode(Article.self, from: try await response.body.collect(upTo: 1 << 20))
        }
    }

    /// Runs `body` with the port of a tinyproxy started for it, stopped afterwards.
    private static func withTinyproxy<Result>(_ body: (Int) async throws -> Result) async throws -> Result {
        guard let executable = ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw BenchmarkFailure(description: "the proxy suite needs tinyproxy (apt-get install tinyproxy)")
        }
        let directory = FileManager.default.temporaryDirectory.appending(path: "trellis-bench-tinyproxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = listener.localAddress!.port!
        try await listener.close()
        let configuration = ["Port \(port)", "Listen 127.0.0.1", "Timeout 60", "Allow 127.0.0.1", "LogLevel Critical",
                             "MaxClients 64", "PidFile \"\(directory.path)/tinyproxy.pid\""].joined(separator: "\n")
        try configuration.write(to: directory.appending(path: "tinyproxy.conf"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["-d", "-c", directory.appending(path: "tinyproxy.conf").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { kill(process.processIdentifier, SIGKILL) }
        while (try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get().close()) == nil {
            guard process.isRunning else { throw BenchmarkFailure(description: "tinyproxy exited at start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await body(port)
    }
}
