import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing
import Trellis
import TrellisTesting

@Suite("Middlewares, interceptors, logging and bad input")
struct PipelineTests {
    struct Stamp: Middleware {
        let value: String
        func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            var request = request
            try request.addHeader("X-Stamp", value)
            return try await next(request)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func middlewaresAndInterceptorsRunInOrderAgainstTheServer(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport, middlewares: [Stamp(value: "first"), Stamp(value: "second")]) {
                $0.interceptors.beforeSending = { request in
                    var request = request
                    try request.addHeader("X-Stamp", "client-hook")
                    return request
                }
            }
            let probe = ProbeService(client: client)
            probe.beforeSending = { request in
                var request = request
                try request.addHeader("X-Stamp", "service-hook")
                return request
            }
            let echo = try await probe.patch()
            // URLSession folds repeated fields with "," and AsyncHTTPClient sends them apart.
            #expect(echo.header("X-Stamp")?.replacingOccurrences(of: " ", with: "") == "first,second,client-hook,service-hook")

            probe.onResponse = { response, request in
                var response = response
                #expect(request.method == .get)
                response.body = Data(#"{"id":1,"title":"replaced"}"#.utf8)
                return response
            }
            #expect(try await probe.present(id: 3) == Post(id: 1, title: "replaced"))
        }
    }

    @Test func beforeSendingCanRejectARequestBeforeAnythingIsSent() async throws {
        struct Refused: Error {}
        let mock = MockTransport()
        let blog = BlogService(client: Client(baseURL: URL(string: "https://api.test")!, transport: mock))
        blog.beforeSending = { _ in throw Refused() }
        await #expect(throws: Refused.self) { try await blog.posts() }
        #expect(mock.requests.isEmpty)
    }

    @Test func mockTransportAnswersAndRecords() async throws {
        let mock = MockTransport()
        mock.register(.get, "/posts/{id}", json: Post(id: 7, title: "Mocked"))
        mock.register(.post, "/posts", status: .created, json: Post(id: 100, title: "New"))
        let blog = BlogService(client: Client(baseURL: URL(string: "https://api.test/v1")!, transport: mock))

        #expect(try await blog.post(id: 7) == Post(id: 7, title: "Mocked"))
        #expect(try await blog.create(post: NewPost(title: "New")) == Post(id: 100, title: "New"))
        await #expect(throws: TrellisError.self) { try await blog.posts() }

        #expect(mock.requests.map(\.path) == ["/v1/posts/7", "/v1/posts", "/v1/posts"])
        #expect(mock.requests[1].bodyText == #"{"title":"New"}"#)
        #expect(mock.requests[1].request.headerFields[.contentType] == "application/json")
    }

    @Test func invalidMethodIsRejected() throws {
        let error = #expect(throws: TrellisError.self) {
            try Request(method: "GET POST", url: URL(string: "https://api.test/x")!)
        }
        guard case .invalidRequest(let invalid) = error else {
            Issue.record("expected invalidRequest, got \(String(describing: error))")
            return
        }
        #expect(invalid.part == .method)
        #expect(invalid.reason.contains("GET POST"))
    }

    @Test func unencodableBodyIsRejectedBeforeSending() async throws {
        struct Reading: Encodable { var value: Double }
        let mock = MockTransport()
        let client = Client(baseURL: URL(string: "https://api.test")!, transport: mock)
        var builder = _RequestBuilder(method: .post, path: "/readings")
        let error = #expect(throws: TrellisError.self) { try builder.body(Reading(value: .nan)) }
        guard case .invalidRequest(let invalid) = error else {
            Issue.record("expected invalidRequest, got \(String(describing: error))")
            return
        }
        #expect(invalid.part == .body)
        _ = client
        #expect(mock.requests.isEmpty)
    }

    @Test func headerValuesWithLineBreaksAreRejected() throws {
        var request = try Request(method: .get, url: URL(string: "https://api.test/x")!)
        #expect(throws: TrellisError.self) { try request.setHeader("X-Name", "a\r\nInjected: yes") }
        #expect(throws: TrellisError.self) { try request.setHeader("Bad Name", "x") }
        #expect(request.headerFields.isEmpty)
    }

    @Test func cURLDescriptionRedactsCredentials() throws {
        var request = try Request(
            method: .post,
            url: URL(string: "https://api.test/posts?draft=1")!,
            body: RequestBody(#"{"title":"it's"}"#, contentType: "application/json")
        )
        try request.setHeader("Authorization", "Bearer secret-token")
        try request.setHeader("Cookie", "session=secret")
        try request.setHeader("Proxy-Authorization", "Basic secret")
        try request.setHeader("X-Visible", "shown")
        let curl = request.cURLDescription
        #expect(!curl.contains("secret"))
        #expect(curl.contains("-X POST"))
        #expect(curl.contains("'Authorization: <redacted>'"))
        #expect(curl.contains("'X-Visible: shown'"))
        #expect(!curl.contains("it'\\''s"))
        #expect(curl.contains("body left out"))
        #expect(request.cURLDescription(includingBody: true).contains(#"--data-binary '{"title":"it'\''s"}'"#))
        #expect(curl.hasSuffix("'https://api.test/posts?draft=1'"))
    }

    @Test(arguments: TransportKind.allCases)
    func debugLogsRedactCredentials(_ kind: TransportKind) async throws {
        let records = LogCapture()
        var logger = Logger(label: "trellis-test") { _ in records }
        logger.logLevel = .debug
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.logger = logger }
            let probe = ProbeService(client: client)
            probe.beforeSending = { request in
                var request = request
                try request.setHeader("Authorization", "Bearer top-secret")
                try request.setHeader("Cookie", "id=top-secret")
                return request
            }
            _ = try await probe.patch()
        }
        let text = records.messages.joined(separator: "\n")
        #expect(text.contains("PATCH"))
        #expect(text.contains("authorization: <redacted>") || text.contains("Authorization: <redacted>"))
        #expect(!text.contains("top-secret"))
        #expect(text.contains("← 200"))
    }
}

/// A log handler that keeps messages in memory.
final class LogCapture: LogHandler, @unchecked Sendable {
    private let lock = NIOLock()
    private var stored: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var messages: [String] { lock.withLock { stored } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lock.withLock { stored.append(event.message.description) }
    }
}
