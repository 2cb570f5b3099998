import Foundation
import Hummingbird
import NIOCore
import Trellis

/// The `cache` suite: a cache hit, answered without the network, against the same call made
/// over the network (`CachePolicy.reload`) in the same run, through one client with an
/// in-memory `HTTPCache`.
enum CacheBenchmark {
    static func run(rounds: Int) async throws -> [CallRow] {
        try await withServer({ router in
            router.get("fresh") { _, _ in
                Hummingbird.Response(
                    status: .ok,
                    headers: [.contentType: "application/json", .cacheControl: "max-age=3600"],
                    body: .init(byteBuffer: ArticleFixtures.articleBody)
                )
            }
        }) { url in
            let client = Client(baseURL: url, transport: AsyncHTTPClientTransport.shared) { $0.cache = HTTPCache() }
            let cached = try Trellis.Request(method: .get, url: url.appending(path: "fresh"))
            let network = { var request = cached; request.cachePolicy = .reload; return request }()
            let hit: CallBenchmark.Call = { _ = try await client.value(for: cached, as: Article.self) }
            let miss: CallBenchmark.Call = { _ = try await client.value(for: network, as: Article.self) }
            return [
                try await CallBenchmark.measure(CallBenchmark.Scenario(name: "GET 199 B, sequential", concurrency: 1, requests: 1_000, raw: miss, trellis: hit), rounds: rounds),
                try await CallBenchmark.measure(CallBenchmark.Scenario(name: "GET 199 B, concurrency 32", concurrency: 32, requests: 6_400, raw: miss, trellis: hit), rounds: rounds),
            ]
        }
    }
}
