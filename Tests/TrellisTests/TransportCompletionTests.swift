import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import Trellis

/// A buffered call without a body waits for the delegate of its AsyncHTTPClient request to hand
/// it the response. AsyncHTTPClient ends a few requests without a word to the delegate: those
/// to a client that is shutting down, and a redirect it follows itself that fails. Each of
/// these calls must still end, with an error, rather than wait forever.
@Suite("How an AsyncHTTPClient call learns that it has ended")
struct TransportCompletionTests {
    /// How `call` ended, or `nil` when it had not ended after `limit`. A call waiting on a
    /// continuation that nothing resumes does not end when cancelled either, so a test's time
    /// limit would leave the test waiting with it; this gives up on the call instead.
    private func ending(within limit: Duration = .seconds(30), _ call: @escaping @Sendable () async throws -> Void) async -> (any Error)?? {
        let outcome = NIOLockedValueBox<CheckedContinuation<(any Error)??, Never>?>(nil)
        let resume = { @Sendable (value: (any Error)??) in
            outcome.withLockedValue { continuation in
                continuation?.resume(returning: value)
                continuation = nil
            }
        }
        return await withCheckedContinuation { continuation in
            outcome.withLockedValue { $0 = continuation }
            let timer = Task {
                try await Task.sleep(for: limit)
                resume(nil)
            }
            Task {
                do {
                    try await call()
                    resume(.some(nil))
                } catch {
                    resume(error)
                }
                timer.cancel()
            }
        }
    }

    private func underlyingFailure(_ outcome: (any Error)??) -> HTTPClientError? {
        guard let outcome else {
            Issue.record("the call had not ended after 30 seconds")
            return nil
        }
        guard case .connectionFailed(let failure) = outcome as? TrellisError else {
            Issue.record("expected connectionFailed, got \(String(describing: outcome))")
            return nil
        }
        return failure.underlying as? HTTPClientError
    }

    @Test
    func aCallAfterTheTransportShutDownFails() async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let transport = AsyncHTTPClientTransport()
            let client = Client(baseURL: url, transport: transport)
            let request = try Request(method: .get, url: url.appending(path: "text"))
            #expect(try await client.value(for: request, as: String.self) == "héllo, world")
            try await transport.shutdown()
            let outcome = await ending { try await client.perform(request) }
            #expect(underlyingFailure(outcome) == .alreadyShutdown)
        }
    }

    /// An `HTTPClient` of the caller's own may follow redirects itself. A followed redirect
    /// still ends the call with the last response, and a loop, which AsyncHTTPClient refuses
    /// without telling the delegate, ends it with AsyncHTTPClient's error.
    @Test
    func redirectsFollowedByTheCallersHTTPClientEndTheCall() async throws {
        try await TestServer.with(TestRoutes.install) { url in
            var configuration = HTTPClient.Configuration()
            configuration.redirectConfiguration = .follow(max: 3, allowCycles: false)
            let httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            let client = Client(baseURL: url, transport: AsyncHTTPClientTransport(httpClient: httpClient))
            var followed = URLComponents(url: url.appending(path: "redirect/302"), resolvingAgainstBaseURL: false)!
            followed.queryItems = [URLQueryItem(name: "to", value: "/echo/after")]
            let echo = try await client.value(for: Request(method: .get, url: followed.url!), as: Echo.self)
            #expect(echo.path == "/echo/after")
            let loop = try Request(method: .get, url: url.appending(path: "loop/0"))
            let outcome = await ending { try await client.perform(loop) }
            #expect(underlyingFailure(outcome) == .redirectCycleDetected)
            try await httpClient.shutdown()
        }
    }

    /// A transport Trellis makes leaves every redirect to the client's redirect stage, even when
    /// the configuration it was given follows them.
    @Test
    func anOwnedHTTPClientDoesNotFollowRedirects() async throws {
        try await TestServer.with(TestRoutes.install) { url in
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            configuration.redirectConfiguration = .follow(max: 3, allowCycles: false)
            let transport = AsyncHTTPClientTransport(configuration: configuration)
            let client = Client(baseURL: url, transport: transport) { $0.redirects = .none }
            var components = URLComponents(url: url.appending(path: "redirect/302"), resolvingAgainstBaseURL: false)!
            components.queryItems = [URLQueryItem(name: "to", value: "/echo/after")]
            let response = try await client.send(Request(method: .get, url: components.url!))
            #expect(response.status == .found)
            #expect(response.headerFields[.location] == "/echo/after")
            try await transport.shutdown()
        }
    }
}
