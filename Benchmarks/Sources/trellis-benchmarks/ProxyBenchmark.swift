import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Trellis

/// Calls through a local tinyproxy and a local squid: Trellis next to raw AsyncHTTPClient
/// given the same proxy.
///
/// AsyncHTTPClient tunnels every request (`CONNECT`), so the like-for-like rows give Trellis
/// the same route (`tunnelsPlainHTTP`). The forwarded rows show Trellis's default for
/// `http://` targets, a connection to the proxy per request, against that same tunnelled raw
/// client: they price the choice rather than the library.
///
/// `TRELLIS_BENCH_PROXIES=tinyproxy` (or `squid`) runs one proxy; `TRELLIS_BENCH_CASES`
/// numbers the cases of each proxy from 0.
enum ProxyBenchmark {
    static func run(rounds: Int) async throws -> [CallRow] {
        let proxies = (ProcessInfo.processInfo.environment["TRELLIS_BENCH_PROXIES"] ?? "tinyproxy,squid").split(separator: ",").map(String.init)
        return try await withServer(.calls) { url in
            var rows: [CallRow] = []
            for name in proxies {
                guard let proxy = LocalProxy(rawValue: name) else { throw BenchmarkFailure(description: "no proxy named \(name) (tinyproxy, squid)") }
                rows += try await proxy.run { port in try await measure(through: port, named: name, url: url, rounds: rounds) }
            }
            return rows
        }
    }

    private static func measure(through proxyPort: Int, named proxyName: String, url: URL, rounds: Int) async throws -> [CallRow] {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.proxy = .server(host: "127.0.0.1", port: proxyPort)
        let raw = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let tunnelled = ArticlesService(client: Client(baseURL: url) {
            $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxyPort, tunnelsPlainHTTP: true))
        })
        let forwarded = ArticlesService(client: Client(baseURL: url) {
            $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxyPort))
        })
        let rawGet = rawCall(raw, url: url, path: "/article", as: Article.self)
        let rawSome = rawCall(raw, url: url, path: "/some-articles", as: [Article].self)
        let rawPost = rawCall(raw, url: url, path: "/articles", as: Article.self, post: true)
        let scenarios = [
            CallBenchmark.Scenario(name: "\(proxyName): GET 199 B, sequential, tunnelled", concurrency: 1, requests: 1_000, raw: rawGet,
                                   trellis: { _ = try await tunnelled.article() }),
            CallBenchmark.Scenario(name: "\(proxyName): GET 199 B, concurrency 32, tunnelled", concurrency: 32, requests: 3_200, raw: rawGet,
                                   trellis: { _ = try await tunnelled.article() }),
            CallBenchmark.Scenario(name: "\(proxyName): GET 23 KB, sequential, tunnelled", concurrency: 1, requests: 300, raw: rawSome,
                                   trellis: { _ = try await tunnelled.someArticles() }),
            CallBenchmark.Scenario(name: "\(proxyName): GET 23 KB, concurrency 32, tunnelled", concurrency: 32, requests: 1_280, raw: rawSome,
                                   trellis: { _ = try await tunnelled.someArticles() }),
            CallBenchmark.Scenario(name: "\(proxyName): POST JSON, sequential, tunnelled", concurrency: 1, requests: 300, raw: rawPost,
                                   trellis: { _ = try await tunnelled.create(article: ArticleFixtures.newArticle) }),
            CallBenchmark.Scenario(name: "\(proxyName): POST JSON, concurrency 32, tunnelled", concurrency: 32, requests: 1_280, raw: rawPost,
                                   trellis: { _ = try await tunnelled.create(article: ArticleFixtures.newArticle) }),
            CallBenchmark.Scenario(name: "\(proxyName): GET 199 B, sequential, forwarded", concurrency: 1, requests: 300, raw: rawGet,
                                   trellis: { _ = try await forwarded.article() }),
            CallBenchmark.Scenario(name: "\(proxyName): POST JSON, sequential, forwarded", concurrency: 1, requests: 300, raw: rawPost,
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

    /// The raw call: what the service sends, through `client`, decoded with `JSONDecoder`.
    /// A POST encodes its article on every call, as the service does (and as the `calls`
    /// suite's raw POST does).
    private static func rawCall<Answer: Decodable & Sendable>(_ client: HTTPClient, url: URL, path: String, as: Answer.Type, post: Bool = false) -> CallBenchmark.Call {
        let encoder = JSONEncoder()
        return {
            var request = HTTPClientRequest(url: url.absoluteString + path)
            request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
            if post {
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(data: try encoder.encode(ArticleFixtures.newArticle)))
            }
            let response = try await client.execute(request, timeout: .seconds(60))
            guard response.status == (post ? .created : .ok) else { throw BenchmarkFailure(description: "status \(response.status)") }
            _ = try JSONDecoder().decode(Answer.self, from: try await response.body.collect(upTo: 1 << 20))
        }
    }
}

/// A proxy program from Debian, started on a free port for a suite and stopped after it.
enum LocalProxy: String {
    case tinyproxy, squid

    func run<Result>(_ body: (Int) async throws -> Result) async throws -> Result {
        let candidates = self == .tinyproxy ? ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"] : ["/usr/sbin/squid", "/usr/bin/squid"]
        guard let executable = candidates.first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw BenchmarkFailure(description: "the proxy suite needs \(rawValue) (apt-get install \(rawValue))")
        }
        let directory = FileManager.default.temporaryDirectory.appending(path: "trellis-bench-\(rawValue)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // squid started by root runs as its own user, which writes its PID file here.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        defer { try? FileManager.default.removeItem(at: directory) }
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = listener.localAddress!.port!
        try await listener.close()
        let file = directory.appending(path: "\(rawValue).conf")
        let configuration: [String]
        let arguments: [String]
        switch self {
        case .tinyproxy:
            configuration = ["Port \(port)", "Listen 127.0.0.1", "Timeout 60", "Allow 127.0.0.1", "LogLevel Critical",
                             "MaxClients 64", "PidFile \"\(directory.path)/tinyproxy.pid\""]
            arguments = ["-d", "-c", file.path]
        case .squid:
            // No cache and no logs: the proxy relays, as tinyproxy does.
            configuration = ["http_port 127.0.0.1:\(port)", "http_access allow all", "cache deny all", "access_log none",
                             "cache_log /dev/null", "pid_filename \(directory.path)/squid.pid", "coredump_dir \(directory.path)",
                             "shutdown_lifetime 0 seconds"]
            arguments = ["-N", "-f", file.path]
        }
        try configuration.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        while (try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get().close()) == nil {
            guard process.isRunning else { throw BenchmarkFailure(description: "\(rawValue) exited at start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await body(port)
    }
}
