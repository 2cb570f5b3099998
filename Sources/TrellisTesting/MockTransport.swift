public import Foundation
public import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
public import Trellis

/// A ``Transport`` that answers from responses you register, and records every request, so
/// code that uses your services can be tested with no server.
///
/// ```swift
/// let mock = MockTransport()
/// mock.register(.get, "/posts/{id}", json: Post(id: 7, title: "Hello"))
/// let blog = BlogService(client: Client(baseURL: URL(string: "https://api.test")!, transport: mock))
///
/// let post = try await blog.post(id: 7)
/// #expect(mock.requests.map(\.path) == ["/posts/7"])
/// ```
///
/// Paths are matched without their query, against the path as sent or its end (so a client
/// whose base URL has a path, `/v1`, still matches `/posts`). A `{name}` segment in a
/// registered path matches any one segment. The latest registration wins. A request with no
/// matching registration gets a 404 that names it.
public final class MockTransport: Transport {
    /// A request as the mock received it, with its body read.
    public struct RecordedRequest: Sendable {
        /// The request.
        public let request: Request
        /// The body's bytes (empty when there was none).
        public let body: Data

        /// The path without the query.
        public var path: String {
            let full = request.head.path ?? "/"
            return full.firstIndex(of: "?").map { String(full[..<$0]) } ?? full
        }

        /// The decoded query items.
        public var queryItems: [URLQueryItem] {
            request.url.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: false)?.queryItems } ?? []
        }

        /// The body as UTF-8 text.
        public var bodyText: String { String(decoding: body, as: UTF8.self) }
    }

    /// Answers one request.
    public typealias Handler = @Sendable (RecordedRequest) async throws -> Response<Data>

    /// Answers one request with a body still to be read: a stream of chunks, an event stream,
    /// a body that stalls partway.
    public typealias StreamingHandler = @Sendable (RecordedRequest) async throws -> Response<ResponseBody>

    private struct Route {
        let method: HTTPRequest.Method?
        let segments: [Substring]
        let handler: StreamingHandler
    }

    private struct State {
        var routes: [Route] = []
        var requests: [RecordedRequest] = []
    }

    private let state = NIOLockedValueBox(State())

    /// An empty mock: every request gets a 404 until you register responses.
    public init() {}

    /// Every request received so far, in order.
    public var requests: [RecordedRequest] {
        state.withLockedValue { $0.requests }
    }

    /// Forgets the recorded requests (the registrations stay).
    public func clearRequests() {
        state.withLockedValue { $0.requests.removeAll() }
    }

    /// Answers requests for `method` (any method when `nil`) and `path` with `handler`.
    public func register(_ method: HTTPRequest.Method?, _ path: String, handler: @escaping Handler) {
        register(method, path, streaming: { request in
            let response = try await handler(request)
            return response.withBody(ResponseBody(response.body))
        })
    }

    /// Answers requests for `method` (any method when `nil`) and `path` with `handler`, whose
    /// body is read as the caller reads it, held to the exchange's limits (the idle timeout
    /// ends a body that stalls).
    ///
    /// ```swift
    /// mock.register(.get, "/events", streaming: { _ in
    ///     Response(head: HTTPResponse(status: .ok, headerFields: [.contentType: "text/event-stream"]),
    ///              body: ResponseBody(stream: events, expectedLength: nil))
    /// })
    /// ```
    public func register(_ method: HTTPRequest.Method?, _ path: String, streaming handler: @escaping StreamingHandler) {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        state.withLockedValue { $0.routes.append(Route(method: method, segments: segments, handler: handler)) }
    }

    /// Answers with a fixed status, headers and body.
    public func register(
        _ method: HTTPRequest.Method?,
        _ path: String,
        status: HTTPResponse.Status = .ok,
        headerFields: HTTPFields = [:],
        body: Data = Data()
    ) {
        register(method, path) { _ in
            Response(head: HTTPResponse(status: status, headerFields: headerFields), body: body)
        }
    }

    /// Answers with a fixed status and a text body.
    public func register(
        _ method: HTTPRequest.Method?,
        _ path: String,
        status: HTTPResponse.Status = .ok,
        headerFields: HTTPFields = [:],
        text: String
    ) {
        var fields = headerFields
        if fields[.contentType] == nil { fields[.contentType] = "text/plain; charset=utf-8" }
        register(method, path, status: status, headerFields: fields, body: Data(text.utf8))
    }

    /// Answers with a fixed status and `value` encoded as JSON.
    public func register<Value: Encodable>(
        _ method: HTTPRequest.Method?,
        _ path: String,
        status: HTTPResponse.Status = .ok,
        headerFields: HTTPFields = [:],
        json value: Value,
        encoder: JSONEncoder = JSONEncoder()
    ) {
        var fields = headerFields
        if fields[.contentType] == nil { fields[.contentType] = "application/json" }
        let body = (try? encoder.encode(value)) ?? Data()
        register(method, path, status: status, headerFields: fields, body: body)
    }

    /// Answers `request` from the registered responses, held to `limits` as a network
    /// transport holds its exchanges (a handler that waits past the deadline times out).
    public func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        try await limits.enforce(for: request) { try await self.answer(request) }
    }

    private func answer(_ request: Request) async throws -> Response<ResponseBody> {
        var body = Data()
        if let requestBody = request.body {
            var chunks = requestBody.makeChunkIterator()
            while let chunk = try await chunks.next() { body.append(contentsOf: chunk.readableBytesView) }
        }
        let recorded = RecordedRequest(request: request, body: body)
        let route = state.withLockedValue { state -> Route? in
            state.requests.append(recorded)
            return state.routes.last { Self.matches($0, recorded) }
        }
        guard let route else {
            let message = "MockTransport: no response registered for \(request.method) \(recorded.path)"
            return Response(
                head: HTTPResponse(status: .notFound, headerFields: [.contentType: "text/plain; charset=utf-8"]),
                body: ResponseBody(message)
            )
        }
        return try await route.handler(recorded)
    }

    private static func matches(_ route: Route, _ request: RecordedRequest) -> Bool {
        if let method = route.method, method != request.request.method { return false }
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true)
        guard segments.count >= route.segments.count else { return false }
        return zip(route.segments, segments.suffix(route.segments.count)).allSatisfy { pattern, segment in
            (pattern.hasPrefix("{") && pattern.hasSuffix("}")) || pattern == segment
        }
    }
}
