import AsyncHTTPClient
import Foundation
import MallocInterposerSwift
import NIOCore
import NIOFoundationCompat
import Trellis

/// Where a service call's allocations go: the same GET made at each layer, so the differences
/// name the layer that adds them. Not part of the default run (`trellis-benchmarks allocations`).
enum AllocationBreakdown {
    static func run() async throws {
        try await withServer(ArticleFixtures.install) { url in
            let transport = AsyncHTTPClientTransport.shared
            let client = Client(baseURL: url, transport: transport)
            let service = ArticlesService(client: client)
            let request = try Request(method: .get, url: url.appending(path: "article"))
            let decoder = JSONDecoder()
            let encoder = JSONEncoder()
            var postRequest = try Request(method: .post, url: url.appending(path: "articles"))
            postRequest.body = RequestBody(ByteBuffer(data: try encoder.encode(ArticleFixtures.newArticle)), contentType: "application/json")
            let post = postRequest
            @Sendable func decodeArticle(from response: Trellis.Response<ResponseBody>) async throws {
                _ = try decoder.decode(Article.self, from: try await response.body.collect(upTo: 1 << 20))
            }
            // A streamed exchange, its deadline a minute from each call.
            let streamed: @Sendable () -> ExchangeLimits = { ExchangeLimits(timeout: .seconds(60), idleTimeout: .seconds(60)) }
            let steps: [(String, @Sendable () async throws -> Void)] = [
                ("raw AsyncHTTPClient + decode", {
                    let response = try await transport.httpClient.execute(HTTPClientRequest(url: url.absoluteString + "/article"), timeout: .seconds(60))
                    _ = try decoder.decode(Article.self, from: try await response.body.collect(upTo: 1 << 20))
                }),
                ("legacy AsyncHTTPClient delegate + decode", {
                    let legacy = try HTTPClient.Request(url: url.absoluteString + "/article")
                    let response = try await transport.httpClient.execute(request: legacy, delegate: ResponseAccumulator(request: legacy), deadline: .now() + .seconds(60)).futureResult.get()
                    _ = try decoder.decode(Article.self, from: response.body ?? ByteBuffer())
                }),
                ("transport.send + collect + decode", { try await decodeArticle(from: transport.send(request, within: streamed())) }),
                ("client.send + collect + decode", { try await decodeArticle(from: client.send(request)) }),
                ("client.value(for:as:)", { _ = try await client.value(for: request, as: Article.self) }),
                ("service.article()", { _ = try await service.article() }),
                ("raw AsyncHTTPClient POST + decode", {
                    var outgoing = HTTPClientRequest(url: url.absoluteString + "/articles")
                    outgoing.method = .POST
                    outgoing.headers.add(name: "Content-Type", value: "application/json")
                    outgoing.body = .bytes(ByteBuffer(data: try encoder.encode(ArticleFixtures.newArticle)))
                    let response = try await transport.httpClient.execute(outgoing, timeout: .seconds(60))
                    _ = try decoder.decode(Article.self, from: try await response.body.collect(upTo: 1 << 20))
                }),
                ("transport.send POST + collect + decode", { try await decodeArticle(from: transport.send(post, within: streamed())) }),
                ("client.send POST + collect + decode", { try await decodeArticle(from: client.send(post)) }),
                ("service.create(article:)", { _ = try await service.create(article: ArticleFixtures.newArticle) }),
            ]
            for (name, step) in steps {
                for _ in 0..<50 { try await step() }
                let calls = 500
                MallocInterposerSwift.initialize()
                MallocInterposerSwift.hook()
                for _ in 0..<calls { try await step() }
                MallocInterposerSwift.unhook()
                print(String(format: "%-40@ %6.1f allocations per call", name as NSString, Double(MallocInterposerSwift.getStatistics().mallocCount) / Double(calls)))
            }
        }
    }
}
