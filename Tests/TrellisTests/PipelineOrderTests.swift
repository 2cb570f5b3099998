import CoreMetrics
import Crypto
import Foundation
import Logging
import Testing
@testable import Trellis
import Tracing
import TrellisTesting

@Suite("The pipeline's order")
struct PipelineOrderTests {
    private struct CallStamp: Middleware {
        func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            try await next(request)
        }
    }

    /// The documentation catalogue's resources, beside this package's sources.
    private static let catalogue = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/Trellis/Trellis.docc")

    /// The stage names a section of "The pipeline" article lists, in its order.
    private func articleStages(in heading: String = "## The stages in order") throws -> [String] {
        let text = try String(contentsOf: Self.catalogue.appendingPathComponent("ThePipeline.md"), encoding: .utf8)
        let start = try #require(text.range(of: heading))
        let rest = text[start.upperBound...]
        let section = rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)]
        return section.split(separator: "`").map(String.init).filter { $0.hasSuffix("Stage") && !$0.contains(" ") }
    }

    /// The stages the picture's source declares in one cluster, in the order it declares them.
    private func pictureStages(inCluster cluster: String, of source: String) throws -> [String] {
        let start = try #require(source.range(of: "subgraph \(cluster) {"))
        let body = source[start.upperBound...].prefix { $0 != "}" }
        return body.split(separator: "\n").compactMap { line in
            let name = line.trimmingCharacters(in: .whitespaces).prefix { $0.isLetter }
            return name.hasSuffix("Stage") ? String(name) : nil
        }
    }

    /// A transport that decodes bodies itself, as URLSession does.
    private struct DecodingTransport: Transport {
        let mock = MockTransport()
        var decodesContentEncoding: Bool { true }

        func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
            try await mock.send(request, within: limits)
        }
    }

    /// A client with every stage present.
    private func clientWithEveryStage() throws -> Client {
        var logger = Logger(label: "order")
        logger.logLevel = .debug
        return Client(
            baseURL: URL(string: "https://api.test")!,
            transport: DecodingTransport(),
            middlewares: [try APIKey(.header("X-Key"), "k"), CallStamp()]
        ) {
            $0.logger = logger
            $0.security.plainHTTP = .refused
            $0.cache = HTTPCache()
            $0.resilience = .init(
                retryBudget: RetryBudget(),
                circuitBreaker: CircuitBreaker(),
                concurrencyLimit: ConcurrencyLimit(maximumInFlight: 4),
                sharedBackoff: SharedBackoff(),
                hedging: Hedging(after: .fixed(.milliseconds(100))),
                coalescing: Coalescing(),
                rateLimit: RateLimit(requests: 100, per: .seconds(1))
            )
        }
    }

    /// The picture (`Resources/pipeline.dot`, drawn into `pipeline.svg`) shows the stages the
    /// code builds, in order, those up to `RedirectStage` once per call and the rest on every
    /// hop; and the SVG was drawn from the source as it is now (`Scripts/draw-pipeline`).
    @Test func thePictureShowsTheStagesInTheirOrderAndIsDrawnFromItsSource() throws {
        let resources = Self.catalogue.appendingPathComponent("Resources")
        let source = try Data(contentsOf: resources.appendingPathComponent("pipeline.dot"))
        let text = String(decoding: source, as: UTF8.self)
        let names = try clientWithEveryStage().pipeline.stages.map(\.name).filter { $0.hasSuffix("Stage") }
        let redirect = try #require(names.firstIndex(of: "RedirectStage"))
        #expect(try pictureStages(inCluster: "cluster_call", of: text) == Array(names[...redirect]))
        #expect(try pictureStages(inCluster: "cluster_hop", of: text) == Array(names[(redirect + 1)...]))

        let drawing = try String(contentsOf: resources.appendingPathComponent("pipeline.svg"), encoding: .utf8)
        let hash = SHA256.hash(data: source).map { String(format: "%02x", $0) }.joined()
        #expect(drawing.contains("from pipeline.dot, sha256 \(hash)"), "pipeline.svg is older than pipeline.dot: run Scripts/draw-pipeline")
    }

    /// "The route of one call" names the stages `blog.post(id: 7)` enters on a client with
    /// default settings: those the pipeline does not pass over for that request.
    @Test func theRouteOfOneCallEntersTheStagesTheArticleNames() async throws {
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: AsyncHTTPClientTransport.shared) {
            // Whatever another test bootstrapped for the process stays out of this one.
            $0.observability = .init(tracer: NoOpTracer(), metricsFactory: NOOPMetricsHandler.instance)
        }
        let request = try _ServiceCore(client: client).makeRequest(
            _ServiceCore(client: client).request(.get, path: "/posts/7", template: "/posts/{id}")
        )
        let call = CallContext(bufferLimit: client.maximumBodySize)
        let entered = client.pipeline.stages.filter { $0.isNeeded(for: request, call) }.map(\.name)
        #expect(entered == (try articleStages(in: "## The route of one call")))
    }

    @Test func theArticleListsTheStagesInTheOrderTheCodeRunsThem() throws {
        let client = try clientWithEveryStage()
        let names = client.pipeline.stages.map(\.name)
        #expect(names.filter { $0.hasSuffix("Stage") } == (try articleStages()))
        // The caller's middlewares sit where their scope says.
        #expect(names.firstIndex(of: "CallStamp")! < names.firstIndex(of: "PreconditionStage")!)
        #expect(names.firstIndex(of: "RedirectStage")! < names.firstIndex(of: "APIKey")!)
        #expect(names.firstIndex(of: "APIKey")! < names.firstIndex(of: "AccessTokenStage")!)
    }

    /// Every test "Where features meet" names (`Suite.test`) is a test of that suite, so the
    /// matrix cannot point at a test that was renamed or never written.
    @Test func theMatrixOfFeaturesThatMeetNamesTestsThatExist() throws {
        let article = try String(contentsOf: Self.catalogue.appendingPathComponent("WhereFeaturesMeet.md"), encoding: .utf8)
        let tests = Self.catalogue.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/TrellisTests")
        let names = article.split(separator: "`").map(String.init).filter { name in
            let parts = name.split(separator: ".")
            return parts.count == 2 && parts[0].hasSuffix("Tests") && parts[1].allSatisfy { $0.isLetter || $0.isNumber }
        }
        #expect(names.count > 30)
        for name in Set(names) {
            let parts = name.split(separator: ".").map(String.init)
            // A suite's file is in the tests' folder, or in one of its folders (`Fleet/`).
            let folders = [""] + ((try? FileManager.default.contentsOfDirectory(atPath: tests.path)) ?? [])
            let file = folders.map { tests.appendingPathComponent($0).appendingPathComponent(parts[0] + ".swift") }
                .first { FileManager.default.fileExists(atPath: $0.path) }
            let source = try String(contentsOf: try #require(file, "WhereFeaturesMeet.md names \(name), whose suite has no file"), encoding: .utf8)
            #expect(source.contains("func \(parts[1])("), "WhereFeaturesMeet.md names \(name), which is not a test")
        }
    }

    @Test func aServiceAddsItsMiddlewaresAfterTheClients() throws {
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: MockTransport(), middlewares: [CallStamp()])
        let derived = client.adding(middlewares: [CallStamp(), CallStamp()])
        #expect(derived.middlewares.count == 3)
        #expect(derived.transport as AnyObject === client.transport as AnyObject)
        #expect(derived.authorizer === client.authorizer)
    }
}
