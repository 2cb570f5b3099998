import AsyncHTTPClient
import Foundation
import NIOSSL
import Testing
import Trellis

@Suite("TLS against a real server")
struct TLSIntegrationTests {
    /// AsyncHTTPClient trusting the test authority only.
    private func trustingTransport(_ certificates: TestCertificates) -> AsyncHTTPClientTransport {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([certificates.authority])
        configuration.tlsConfiguration = tls
        return AsyncHTTPClientTransport(configuration: configuration)
    }

    @Test func aTrustedServerAnswersAndADowngradeRedirectIsRefused() async throws {
        let certificates = try TestCertificates()
        let transport = trustingTransport(certificates)
        try await TestServer.with(TestRoutes.install) { plainURL in
            try await TLSTestServer.with(certificates, TestRoutes.install) { secureURL in
                let client = Client(baseURL: secureURL, transport: transport)
                let echo = try await client.value(for: Request(method: .get, url: secureURL.appending(path: "echo/hello")), as: Echo.self)
                #expect(echo.path == "/echo/hello")

                var components = URLComponents(url: secureURL.appending(path: "redirect/302"), resolvingAgainstBaseURL: false)!
                components.queryItems = [URLQueryItem(name: "to", value: plainURL.appending(path: "echo/downgraded").absoluteString)]
                let downgrade = try Request(method: .get, url: components.url!)
                let error = await #expect(throws: TrellisError.self) { try await client.perform(downgrade) }
                guard case .redirectFailed(let failure) = error else {
                    Issue.record("expected redirectFailed, got \(String(describing: error))")
                    return
                }
                #expect(failure.reason.contains("http"))
                #expect(failure.to.hasPrefix("http://"))

                let permissive = Client(baseURL: secureURL, transport: transport) { $0.redirects = RedirectPolicy(allowsInsecureDowngrade: true) }
                let followed = try await permissive.value(for: downgrade, as: Echo.self)
                #expect(followed.path == "/echo/downgraded")
            }
        }
        try await transport.shutdown()
    }

    @Test(.hangGuard, arguments: TransportKind.allCases)
    func anUntrustedCertificateIsATLSFailure(_ kind: TransportKind) async throws {
        let certificates = try TestCertificates()
        try await TLSTestServer.with(certificates, TestRoutes.install) { secureURL in
            let transport = kind == .asyncHTTPClient ? AsyncHTTPClientTransport() : kind.transport
            let client = Client(baseURL: secureURL, transport: transport) { $0.timeouts.request = .seconds(30) }
            let error = await #expect(throws: TrellisError.self) {
                try await client.perform(Request(method: .get, url: secureURL.appending(path: "echo/x")))
            }
            guard case .tlsFailed(let failure) = error else {
                Issue.record("expected tlsFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.host.hasPrefix("localhost"))
            if let owned = transport as? AsyncHTTPClientTransport { try await owned.shutdown() }
        }
    }

    @Test func plainHTTPCanBeRefusedForEveryHostOrAllButLoopback() async throws {
        let certificates = try TestCertificates()
        let transport = trustingTransport(certificates)
        try await TestServer.with(TestRoutes.install) { plainURL in
            let plain = try Request(method: .get, url: plainURL.appending(path: "echo/clear"))
            let refusing = Client(baseURL: plainURL, transport: transport) { $0.security.plainHTTP = .refused }
            let error = await #expect(throws: TrellisError.self) { try await refusing.perform(plain) }
            guard case .invalidRequest(let problem) = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                return
            }
            #expect(problem.part == .url)
            #expect(problem.reason.contains("plain http:// to 127.0.0.1 is refused"))

            let local = Client(baseURL: plainURL, transport: transport) { $0.security.plainHTTP = .refusedExceptLoopback }
            let echo = try await local.value(for: plain, as: Echo.self)
            #expect(echo.path == "/echo/clear")

            // A redirect hop is checked too, even when downgrades are allowed.
            try await TLSTestServer.with(certificates, TestRoutes.install) { secureURL in
                var components = URLComponents(url: secureURL.appending(path: "redirect/302"), resolvingAgainstBaseURL: false)!
                components.queryItems = [URLQueryItem(name: "to", value: plainURL.appending(path: "echo/x").absoluteString)]
                let client = Client(baseURL: secureURL, transport: transport) {
                    $0.redirects = RedirectPolicy(allowsInsecureDowngrade: true)
                    $0.security.plainHTTP = .refused
                }
                await #expect(throws: TrellisError.self) { try await client.perform(Request(method: .get, url: components.url!)) }
            }
        }
        try await transport.shutdown()
    }
}
