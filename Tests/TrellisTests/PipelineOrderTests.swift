import CoreMetrics
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

    /// The stage names a README section lists, in its order.
    private func readmeStages(in heading: String = "## How a request travels") throws -> [String] {
        let readme = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        let start = try #require(text.range(of: heading))
        let rest = text[start.upperBound...]
        let section = rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)]
        return section.split(separator: "`").map(String.init).filter { $0.hasSuffix("Stage") && !$0.contains(" ") }
    }

    /// "The route of one call" names the stages `blog.post(id: 7)` enters on a client with
    /// default settings: those the pipeline does not pass over for that request.
    @Test func theRouteOfOneCallEntersTheStagesTheReadmeNames() async throws {
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: AsyncHTTPClientTransport.shared) {
            // Whatever another test bootstrapped for the process stays out of this one.
            $0.observability = .init(tracer: NoOpTracer(), metricsFactory: NOOPMetricsHandler.instance)
        }
        let request = try _ServiceCore(client: client).makeRequest(
            _ServiceCore(client: client).request(.get, path: "/posts/7", template: "/posts/{id}")
        )
        let call = CallContext(bufferLimit: client.maximumBodySize)
        let entered = client.pipeline.stages.filter { $0.isNeeded(for: request, call) }.map(\.name)
        #expect(entered == (try readmeStages(in: "## The route of one call")))
    }

    @Test func theReadmeListsTheStagesInTheOrderTheCodeRunsThem() throws {
        var logger = Logger(label: "order")
        logger.logLevel = .debug
        let client = Client(
            baseURL: URL(string: "https://api.test")!,
            transport: MockTransport(),
            middlewares: [try APIKey(.header("X-Key"), "k"), CallStamp()]
        ) {
            $0.logger = logger
            $0.security.plainHTTP = .refused
            $0.cache = HTTPCache()
        }
        let names = client.pipeline.stages.map(\.name)
        #expect(names.filter { $0.hasSuffix("Stage") } == (try readmeStages()))
        // The caller's middlewares sit where their scope says.
        #expect(names.firstIndex(of: "CallStamp")! < names.firstIndex(of: "PreconditionStage")!)
        #expect(names.firstIndex(of: "RedirectStage")! < names.firstIndex(of: "APIKey")!)
        #expect(names.firstIndex(of: "APIKey")! < names.firstIndex(of: "AccessTokenStage")!)
    }

    @Test func aServiceAddsItsMiddlewaresAfterTheClients() throws {
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: MockTransport(), middlewares: [CallStamp()])
        let derived = client.adding(middlewares: [CallStamp(), CallStamp()])
        #expect(derived.middlewares.count == 3)
        #expect(derived.transport as AnyObject === client.transport as AnyObject)
        #expect(derived.authorizer === client.authorizer)
    }
}
