import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import InMemoryTracing
import MetricsTestKit
import NIOConcurrencyHelpers
import NIOCore
import Testing
import Tracing
import Trellis

@Service
protocol Catalog {
    @GET("/obs/items/{id}")
    func item(id: Int) async throws -> CatalogItem

    @GET("/obs/flaky/{key}")
    @Retry(maximumRetries: 2)
    func flaky(key: String) async throws -> CatalogItem

    @GET("/obs/moved")
    func moved() async throws -> CatalogItem

    @GET("/obs/protected")
    @RequiresAccessToken
    func protected() async throws -> CatalogItem

    @GET("/obs/missing")
    func missing() async throws -> CatalogItem

    @POST("/obs/items") @Body("item")
    func add(item: CatalogItem) async throws -> CatalogItem
}

struct CatalogItem: Codable, Sendable, Equatable {
    var id: Int
    /// The trace headers the server received, as it saw them.
    var traceID: String?
    /// How many trace ID fields the request carried.
    var traceIDFields: Int?
}

/// Routes for the observability tests: each answers with the in-memory tracer's trace ID it
/// received, so a test can check that the context went out with the request.
final class CatalogRoutes: Sendable {
    private let flakyAttempts = NIOLockedValueBox([String: Int]())

    func install(_ router: Router<BasicRequestContext>) {
        @Sendable func item(_ id: Int, _ request: Hummingbird.Request) throws -> Hummingbird.Response {
            let traceIDs = request.headers[values: HTTPField.Name(InMemoryTracer.traceIDKey)!]
            let body = try JSONEncoder().encode(CatalogItem(id: id, traceID: traceIDs.first, traceIDFields: traceIDs.count))
            return Hummingbird.Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: body)))
        }
        router.get("obs/items/:id") { request, context in
            try item(try context.parameters.require("id", as: Int.self), request)
        }
        router.get("obs/flaky/:key") { request, context in
            let key = try context.parameters.require("key")
            let attempt = self.flakyAttempts.withLockedValue { counts in
                counts[key, default: 0] += 1
                return counts[key]!
            }
            guard attempt > 1 else { return Hummingbird.Response(status: .serviceUnavailable) }
            return try item(attempt, request)
        }
        router.get("obs/moved") { _, _ in
            Hummingbird.Response(status: .found, headers: [.location: "/obs/items/7"])
        }
        router.get("obs/protected") { request, _ in
            guard request.headers[.authorization] == "Bearer fresh" else {
                return Hummingbird.Response(status: .unauthorized)
            }
            return try item(1, request)
        }
        router.post("obs/items") { request, context in
            let posted = try await request.decode(as: CatalogItem.self, context: context)
            return try item(posted.id, request)
        }
        router.get("obs/missing") { _, _ in
            Hummingbird.Response(status: .notFound)
        }
    }
}

/// Records every event a client reports, in order, as text.
final class EventLog: ClientEventMonitor {
    private let entries = NIOLockedValueBox([String]())
    var events: [String] { entries.withLockedValue { $0 } }

    private func add(_ entry: String) { entries.withLockedValue { $0.append(entry) } }

    func requestWillBeSent(_ request: Trellis.Request, hop: Int) { add("send \(hop) \(request.head.path ?? "")") }
    func responseHeadReceived(_ response: HTTPResponse, for request: Trellis.Request, hop: Int) { add("head \(hop) \(response.status.code)") }
    func responseBodyFinished(byteCount: Int, error: (any Error)?, for request: Trellis.Request, hop: Int) {
        add("body \(hop) \(error == nil ? "done" : "failed")")
    }
    func hopFailed(_ error: any Error, for request: Trellis.Request, hop: Int) { add("failed \(hop)") }
    func retryScheduled(retry: Int, delay: Duration, cause: RetryCause, for request: Trellis.Request) {
        switch cause {
        case .status(let status): add("retry \(retry) after \(status.code)")
        case .error(let error): add("retry \(retry) after error: \(error)")
        }
    }
    func redirectFollowed(from request: Trellis.Request, to redirected: Trellis.Request, status: HTTPResponse.Status) {
        add("redirect \(status.code) to \(redirected.head.path ?? "")")
    }
    func accessTokenRefreshed(label: String, for request: Trellis.Request) { add("refreshed \(label)") }
    func callFinished(_ call: CallSummary) {
        add("finished \(call.endpoint) \(call.status.map { String($0.code) } ?? "-") hops \(call.hops)\(call.error == nil ? "" : " error")")
    }
}

@Suite("Tracing, metrics and event monitors")
struct ObservabilityTests {
    private struct Observed {
        let tracer = InMemoryTracer()
        let metrics = TestMetrics()
        let events = EventLog()

        func client(_ url: URL, _ kind: TransportKind, configure: (inout Client.Configuration) -> Void = { _ in }) -> Client {
            Client(baseURL: url, transport: kind.transport) {
                $0.observability = .init(tracer: tracer, metricsFactory: metrics, eventMonitors: [events])
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 2, random: { 0.5 }))
                configure(&$0)
            }
        }
    }

    private func withCatalog(_ body: (URL) async throws -> Void) async throws {
        let routes = CatalogRoutes()
        try await TestServer.with({ routes.install($0) }) { url in try await body(url) }
    }

    /// AsyncHTTPClient traces too when its configuration has a tracer (its default
    /// configuration takes the one the process bootstrapped): the transport turns that off, so
    /// that its delegate API (a call without a body) adds no root span of its own, and its
    /// async API (a call with one) no second trace context.
    @Test
    func aCallOverAsyncHTTPClientWhoseConfigurationHasATracerIsStillOneSpanWithOneContext() async throws {
        try await withCatalog { url in
            let observed = Observed()
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            configuration.tracing.tracer = observed.tracer
            let transport = AsyncHTTPClientTransport(configuration: configuration)
            let client = Client(baseURL: url, transport: transport) {
                $0.observability = .init(tracer: observed.tracer)
            }
            let catalog = CatalogService(client: client)
            let fetched = try await catalog.item(id: 42)
            let added = try await catalog.add(item: CatalogItem(id: 7))
            try await transport.shutdown()

            #expect(observed.tracer.finishedSpans.map(\.operationName) == ["GET /obs/items/{id}", "POST /obs/items"])
            #expect(fetched.traceIDFields == 1)
            #expect(added.traceIDFields == 1)
            #expect(added.id == 7)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aCallIsOneClientSpanNamedAfterItsTemplateWithItsContextSent(_ kind: TransportKind) async throws {
        try await withCatalog { url in
            let observed = Observed()
            let catalog = CatalogService(client: observed.client(url, kind))
            let item = try await catalog.item(id: 42)

            let span = try #require(observed.tracer.finishedSpans.only)
            #expect(span.operationName == "GET /obs/items/{id}")
            #expect(span.kind == .client)
            #expect(span.attributes["http.request.method"]?.toSpanAttribute() == "GET")
            #expect(span.attributes["server.address"]?.toSpanAttribute() == "127.0.0.1")
            #expect(span.attributes["server.port"]?.toSpanAttribute() == .int64(Int64(url.port!)))
            #expect(span.attributes["url.full"]?.toSpanAttribute() == .string(url.absoluteString + "/obs/items/42"))
            #expect(span.attributes["http.response.status_code"]?.toSpanAttribute() == 200)
            #expect(span.attributes["error.type"] == nil)
            // The server got the span's trace: the context was injected into the request.
            #expect(item.traceID == span.traceID)
            #expect(item.traceID != nil)

            let duration = try observed.metrics.expectTimer(
                "http.client.request.duration",
                [("http.request.method", "GET"), ("http.route", "/obs/items/{id}"), ("http.response.status_code", "200")]
            )
            #expect(duration.values.count == 1)
            let active = try observed.metrics.expectMeter(
                "http.client.active_requests",
                [("http.request.method", "GET"), ("server.address", "127.0.0.1"), ("server.port", String(url.port!))]
            )
            #expect(active.values == [1, 0])
            #expect(observed.events.events == ["send 1 /obs/items/42", "head 1 200", "body 1 done", "finished GET /obs/items/{id} 200 hops 1"])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRetriedCallIsOneSpanWithTheRetryAsAnEventAndItsResendCount(_ kind: TransportKind) async throws {
        try await withCatalog { url in
            let observed = Observed()
            let catalog = CatalogService(client: observed.client(url, kind))
            _ = try await catalog.flaky(key: "retry-\(kind)")

            let span = try #require(observed.tracer.finishedSpans.only)
            #expect(span.operationName == "GET /obs/flaky/{key}")
            #expect(span.attributes["http.request.resend_count"]?.toSpanAttribute() == 1)
            #expect(span.events.map(\.name) == ["retry scheduled"])
            #expect(span.events.first?.attributes["http.response.status_code"]?.toSpanAttribute() == 503)
            #expect(observed.events.events == [
                "send 1 /obs/flaky/retry-\(kind)", "head 1 503", "body 1 done", "retry 1 after 503",
                "send 2 /obs/flaky/retry-\(kind)", "head 2 200", "body 2 done", "finished GET /obs/flaky/{key} 200 hops 2",
            ])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRedirectIsAnEventOfTheCallsSpanAndEachHopCarriesTheContext(_ kind: TransportKind) async throws {
        try await withCatalog { url in
            let observed = Observed()
            let catalog = CatalogService(client: observed.client(url, kind))
            let item = try await catalog.moved()

            let span = try #require(observed.tracer.finishedSpans.only)
            #expect(span.operationName == "GET /obs/moved")
            #expect(span.events.map(\.name) == ["redirect followed"])
            #expect(span.attributes["http.request.resend_count"]?.toSpanAttribute() == 1)
            #expect(item.traceID == span.traceID)
            #expect(observed.tracer.performedContextInjections.count == 2)
            #expect(observed.events.events == [
                "send 1 /obs/moved", "head 1 302", "body 1 done", "redirect 302 to /obs/items/7",
                "send 2 /obs/items/7", "head 2 200", "body 2 done", "finished GET /obs/moved 200 hops 2",
            ])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRefreshedTokenIsAnEventAndTheRefreshCallsAreChildSpans(_ kind: TransportKind) async throws {
        try await withCatalog { url in
            let observed = Observed()
            let storage = InMemoryAccessTokenStorage([AccessTokenRequirement.defaultLabel: AccessToken(accessToken: "stale")])
            let client = observed.client(url, kind) { $0.accessTokens.storage = storage }
            let catalog = CatalogService(client: client)
            catalog.onAuthRetry = { catalog in
                // A call the refresh makes is a child of the call that needed the token.
                _ = try await catalog.item(id: 9)
                return AccessToken(accessToken: "fresh")
            }
            _ = try await catalog.protected()

            let spans = observed.tracer.finishedSpans
            let call = try #require(spans.first { $0.operationName == "GET /obs/protected" })
            let refresh = try #require(spans.first { $0.operationName == "GET /obs/items/{id}" })
            #expect(call.events.map(\.name) == ["access token refreshed"])
            #expect(refresh.parentSpanID == call.spanID)
            #expect(refresh.traceID == call.traceID)
            #expect(observed.events.events.contains("refreshed \(AccessTokenRequirement.defaultLabel)"))
            #expect(observed.events.events.last == "finished GET /obs/protected 200 hops 2")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aFailedConnectionEndsTheSpanInErrorAndIsCountedByItsType(_ kind: TransportKind) async throws {
        let refusing = try RefusingPort()
        let observed = Observed()
        let catalog = CatalogService(client: observed.client(refusing.url, kind) { $0.retry = .none })
        await #expect(throws: TrellisError.self) { try await catalog.item(id: 1) }

        let span = try #require(observed.tracer.finishedSpans.only)
        #expect(span.status?.code == .error)
        #expect(span.attributes["error.type"]?.toSpanAttribute() == "connectionFailed")
        #expect(span.errors.count == 1)
        _ = try observed.metrics.expectTimer(
            "http.client.request.duration",
            [("http.request.method", "GET"), ("http.route", "/obs/items/{id}"), ("error.type", "connectionFailed")]
        )
        #expect(observed.events.events == ["send 1 /obs/items/1", "failed 1", "finished GET /obs/items/{id} - hops 1 error"])
        withExtendedLifetime(refusing) {}
    }

    @Test func aRefusedStatusIsTheErrorTypeOfTheSpanAndTheMetric() async throws {
        try await withCatalog { url in
            let observed = Observed()
            let catalog = CatalogService(client: observed.client(url, .asyncHTTPClient))
            await #expect(throws: TrellisError.self) { try await catalog.missing() }

            let span = try #require(observed.tracer.finishedSpans.only)
            #expect(span.attributes["http.response.status_code"]?.toSpanAttribute() == 404)
            #expect(span.attributes["error.type"]?.toSpanAttribute() == "404")
            _ = try observed.metrics.expectTimer(
                "http.client.request.duration",
                [("http.request.method", "GET"), ("http.route", "/obs/missing"), ("http.response.status_code", "404"), ("error.type", "404")]
            )
        }
    }

    @Test func credentialsInTheURLAreRedactedInTheSpan() async throws {
        try await withCatalog { url in
            let observed = Observed()
            let client = observed.client(url, .asyncHTTPClient)
            var request = try Trellis.Request(method: .get, url: url.appending(path: "obs/items/3").appending(queryItems: [URLQueryItem(name: "api_key", value: "s3cret")]))
            request.pathTemplate = "/obs/items/{id}"
            _ = try await client.value(for: request, as: CatalogItem.self)
            let span = try #require(observed.tracer.finishedSpans.only)
            let full = try #require(span.attributes["url.full"]?.toSpanAttribute())
            #expect(!"\(full)".contains("s3cret"))
        }
    }

    @Test func withNothingListeningNoSpanNorMetricIsMadeAndNoHeaderAdded() async throws {
        try await withCatalog { url in
            // The process bootstraps nothing in the tests: the client's own tracer is the only one.
            let client = Client(baseURL: url)
            let item = try await CatalogService(client: client).item(id: 5)
            #expect(item.traceID == nil)
        }
    }
}

extension Array {
    /// The one element, or `nil` when there are none or several.
    fileprivate var only: Element? { count == 1 ? first : nil }
}
