import Foundation
import HTTPTypes
import NIOCore
import Testing
import Trellis

@Suite("Redirects followed by the client")
struct RedirectIntegrationTests {
    private func redirect(_ url: URL, _ code: Int, to target: String, method: HTTPRequest.Method = .post, body: RequestBody? = RequestBody("payload")) throws -> Request {
        var components = URLComponents(url: url.appending(path: "redirect/\(code)"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "to", value: target)]
        return try Request(method: method, url: components.url!, body: body)
    }

    private func redirectFailure(_ error: (any Error)?) -> RedirectFailure? {
        if case .redirectFailed(let failure) = error as? TrellisError { return failure }
        Issue.record("expected redirectFailed, got \(String(describing: error))")
        return nil
    }

    @Test(arguments: TransportKind.allCases)
    func seeOtherBecomesGETAndTemporaryRedirectKeepsMethodAndBody(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let seeOther = try await client.value(for: redirect(url, 303, to: "/echo/after"), as: Echo.self)
            #expect(seeOther.method == "GET")
            #expect(seeOther.body.isEmpty)
            #expect(seeOther.path == "/echo/after")
            let temporary = try await client.value(for: redirect(url, 307, to: "/echo/after"), as: Echo.self)
            #expect(temporary.method == "POST")
            #expect(temporary.body == "payload")
            let permanent = try await client.value(for: redirect(url, 308, to: "/echo/after", method: .put), as: Echo.self)
            #expect(permanent.method == "PUT")
            #expect(permanent.body == "payload")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func loopsAndTooManyRedirectsFail(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let loop = await #expect(throws: TrellisError.self) {
                try await client.perform(Request(method: .get, url: url.appending(path: "loop/0")))
            }
            #expect(redirectFailure(loop)?.reason.contains("loop") == true)

            let strict = Client(baseURL: url, transport: kind.transport) { $0.redirects = RedirectPolicy(maximum: 1) }
            let chain = try redirect(url, 302, to: url.absoluteString + "/redirect/302?to=/echo/x", method: .get, body: nil)
            let tooMany = await #expect(throws: TrellisError.self) { try await strict.perform(chain) }
            #expect(redirectFailure(tooMany)?.reason.contains("more than 1") == true)

            let none = Client(baseURL: url, transport: kind.transport) { $0.redirects = .none }
            let response = try await none.send(redirect(url, 302, to: "/echo/x", method: .get, body: nil))
            #expect(response.status == .found)
            #expect(response.headerFields[.location] == "/echo/x")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aOneShotBodyIsNotSentTwice(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let stream = AsyncStream<ByteBuffer> { continuation in
                continuation.yield(ByteBuffer(string: "once"))
                continuation.finish()
            }
            let request = try redirect(url, 307, to: "/echo/after", body: RequestBody(stream: stream))
            let error = await #expect(throws: TrellisError.self) { try await client.perform(request) }
            #expect(redirectFailure(error)?.reason.contains("one-shot") == true)
        }
    }

    @Test
    func anHTTPSToHTTPRedirectIsRefused() async throws {
        let transport = RedirectingTransport(location: "http://example.com/plain")
        let client = Client(baseURL: URL(string: "https://example.com")!, transport: transport)
        let error = await #expect(throws: TrellisError.self) {
            try await client.perform(Request(method: .get, url: URL(string: "https://example.com/secure")!))
        }
        #expect(redirectFailure(error)?.reason.contains("https to http") == true)
        #expect(transport.requests == 1)
    }

    @Test
    func secretQueryValuesAreRedactedInCURL() throws {
        let request = try Request(method: .get, url: URL(string: "https://example.com/x?api_key=abc&page=2&access_token=t")!)
        let curl = request.cURLDescription
        #expect(curl.contains("api_key=<redacted>&page=2&access_token=<redacted>"))
        #expect(!curl.contains("abc"))
    }
}

/// Answers every request with a 302 to `location`, counting requests: a transport for the
/// one redirect rule that needs a TLS server to reach over the network.
private final class RedirectingTransport: Transport, @unchecked Sendable {
    let location: String
    private let lock = NSLock()
    private var count = 0

    init(location: String) { self.location = location }

    var requests: Int { lock.withLock { count } }

    func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        lock.withLock { count += 1 }
        return Response(head: HTTPResponse(status: .found, headerFields: [.location: location]), body: ResponseBody())
    }
}
