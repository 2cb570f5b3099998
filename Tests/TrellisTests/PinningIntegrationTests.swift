import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import NIOSSL
import Testing
import Trellis

@Suite("Certificate and public-key pinning against a real TLS server")
struct PinningIntegrationTests {
    /// Counts the requests that reached the server, to show a refused server got none.
    private final class Hits: Sendable {
        let count = NIOLockedValueBox(0)
        func install(_ router: Router<BasicRequestContext>) {
            TestRoutes.install(router)
            router.get("pinned") { _, _ in
                self.count.withLockedValue { $0 += 1 }
                return "pinned"
            }
        }
    }

    /// AsyncHTTPClient's defaults with the test authority as the system's trust store.
    private func trusting(_ certificates: TestCertificates) -> HTTPClient.Configuration {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([certificates.authority])
        configuration.tlsConfiguration = tls
        return configuration
    }

    private func pinned(_ certificate: NIOSSLCertificate) throws -> PinnedCertificate {
        try PinnedCertificate(der: certificate.toDERBytes())
    }

    /// The certificate as a `.pem` file holds it.
    private func pemData(_ certificate: NIOSSLCertificate) throws -> Data {
        let base64 = Data(try certificate.toDERBytes()).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return Data("-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n".utf8)
    }

    private func keyPin(_ certificate: NIOSSLCertificate) throws -> PublicKeyPin {
        try pinned(certificate).publicKeyPin
    }

    /// Sends `GET /pinned` through `transport` and returns the body, or throws.
    /// The pinned page; the timeout is none of these tests' business unless one gives it (a
    /// TLS handshake under ThreadSanitizer, beside a busy core, once took past 30 s).
    private func fetch(_ url: URL, _ transport: AsyncHTTPClientTransport, timeout: Duration = .seconds(240)) async throws -> String {
        let client = Client(baseURL: url, transport: transport) { $0.timeouts.request = timeout; $0.security.pinning = transport.pinning }
        let response = try await client.data(for: Trellis.Request(method: .get, url: url.appending(path: "pinned")))
        return String(decoding: response.body, as: UTF8.self)
    }

    private func fetch(_ url: URL, _ transport: AsyncHTTPClientTransport, expecting expected: String) async throws {
        let body = try await fetch(url, transport)
        #expect(body == expected)
    }

    private func expectPinningFailure(_ body: () async throws -> String, mentioning words: String) async {
        let error = await #expect(throws: TrellisError.self) { try await body() }
        guard case .pinningFailed(let failure) = error else {
            Issue.record("expected pinningFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.host.hasPrefix("localhost:"))
        #expect(failure.reason.contains(words), "\(failure.reason)")
    }

    @Test func aPinnedServerCertificateIsTrustedWithoutTheSystemTrustingIt() async throws {
        let certificates = try TestCertificates()
        let hits = Hits()
        let pinning = try CertificatePinning([PinnedHost("localhost", certificates: [pinned(certificates.leaf)])])
        let transport = AsyncHTTPClientTransport(pinning: pinning)
        try await TLSTestServer.with(certificates, hits.install) { url in
            try await fetch(url, transport, expecting: "pinned")
            // The pooled connection, checked once, carries the next request.
            try await fetch(url, transport, expecting: "pinned")
        }
        #expect(hits.count.withLockedValue { $0 } == 2)
        try await transport.shutdown()
    }

    /// Certificates as an app bundles them, `Data` in PEM or DER, pinned in one call.
    @Test func certificatesGivenAsPEMOrDERDataArePinnedInOneCall() async throws {
        let certificates = try TestCertificates()
        let der = Data(try certificates.leaf.toDERBytes())
        let pem = try pemData(certificates.leaf)
        let keyPin = try keyPin(certificates.leaf).description
        for pinning in [
            try CertificatePinning("localhost", certificates: [der]),
            try CertificatePinning("localhost", certificates: [pem]),
            try CertificatePinning("localhost", publicKeys: [keyPin]),
        ] {
            let transport = AsyncHTTPClientTransport(configuration: trusting(certificates), pinning: pinning)
            try await TLSTestServer.with(certificates, Hits().install) { url in
                try await fetch(url, transport, expecting: "pinned")
            }
            try await transport.shutdown()
        }
        let stranger = try TestCertificates()
        let refusing = AsyncHTTPClientTransport(pinning: try CertificatePinning("localhost", certificates: [pemData(stranger.leaf)]))
        try await TLSTestServer.with(certificates, Hits().install) { url in
            await expectPinningFailure({ try await fetch(url, refusing) }, mentioning: "certificate")
        }
        try await refusing.shutdown()
        #expect(throws: InvalidPin.self) { try CertificatePinning("localhost", certificates: [Data("not a certificate".utf8)]) }
    }

    @Test func aPinnedCACertificateIsTheOnlyAnchor() async throws {
        let certificates = try TestCertificates()
        let pinning = try CertificatePinning([PinnedHost("localhost", certificates: [pinned(certificates.authority)])])
        let transport = AsyncHTTPClientTransport(pinning: pinning)
        try await TLSTestServer.with(certificates, Hits().install) { url in
            try await fetch(url, transport, expecting: "pinned")
        }
        try await transport.shutdown()
    }

    @Test func anotherCertificateIsRefusedBeforeTheRequestIsSent() async throws {
        let certificates = try TestCertificates()
        let stranger = try TestCertificates()
        let hits = Hits()
        let pinnedLeaf = AsyncHTTPClientTransport(
            pinning: try CertificatePinning([PinnedHost("localhost", certificates: [pinned(stranger.leaf)])])
        )
        let pinnedCA = AsyncHTTPClientTransport(
            pinning: try CertificatePinning([PinnedHost("localhost", certificates: [pinned(stranger.authority)])])
        )
        try await TLSTestServer.with(certificates, hits.install) { url in
            await expectPinningFailure({ try await fetch(url, pinnedLeaf) }, mentioning: "not pinned")
            await expectPinningFailure({ try await fetch(url, pinnedCA) }, mentioning: "does not lead to a pinned CA certificate")
        }
        #expect(hits.count.withLockedValue { $0 } == 0)
        try await pinnedLeaf.shutdown()
        try await pinnedCA.shutdown()
    }

    @Test func aPublicKeyPinSurvivesTheReissueOfTheCertificate() async throws {
        let certificates = try TestCertificates()
        let renewed = try certificates.reissued()
        #expect(renewed.leaf != certificates.leaf)
        let pin = try keyPin(certificates.leaf)
        // Written as OkHttp writes it, and as bare base64.
        #expect(try PublicKeyPin(pin.description) == pin)
        #expect(try PublicKeyPin(String(pin.description.dropFirst("sha256/".count))) == pin)
        let transport = AsyncHTTPClientTransport(
            configuration: trusting(certificates),
            pinning: try CertificatePinning([PinnedHost("localhost", publicKeys: [pin])])
        )
        try await TLSTestServer.with(certificates, Hits().install) { url in
            try await fetch(url, transport, expecting: "pinned")
        }
        try await TLSTestServer.with(renewed, Hits().install) { url in
            try await fetch(url, transport, expecting: "pinned")
        }
        try await transport.shutdown()
    }

    @Test func aWrongKeyFailsAtTheHandshakeNotAtTheTimeout() async throws {
        let certificates = try TestCertificates()
        let stranger = try TestCertificates()
        let hits = Hits()
        let transport = AsyncHTTPClientTransport(
            configuration: trusting(certificates),
            pinning: try CertificatePinning([PinnedHost("localhost", publicKeys: [keyPin(stranger.leaf)])])
        )
        try await TLSTestServer.with(certificates, hits.install) { url in
            let elapsed = await ContinuousClock().measure {
                await expectPinningFailure({ try await fetch(url, transport, timeout: .seconds(60)) }, mentioning: "public key")
            }
            // The handshake takes milliseconds; failing at the deadline would take 60 s.
            #expect(elapsed < .seconds(20), "a pin mismatch took \(elapsed)")
            print("pin mismatch reported after \(elapsed)")
        }
        #expect(hits.count.withLockedValue { $0 } == 0)
        try await transport.shutdown()
    }

    @Test func certificateAndKeyPinsMustBothHold() async throws {
        let certificates = try TestCertificates()
        let stranger = try TestCertificates()
        let both = AsyncHTTPClientTransport(pinning: try CertificatePinning([
            PinnedHost("localhost", certificates: [pinned(certificates.authority)], publicKeys: [keyPin(certificates.leaf)])
        ]))
        let wrongKey = AsyncHTTPClientTransport(pinning: try CertificatePinning([
            PinnedHost("localhost", certificates: [pinned(certificates.authority)], publicKeys: [keyPin(stranger.leaf)])
        ]))
        try await TLSTestServer.with(certificates, Hits().install) { url in
            try await fetch(url, both, expecting: "pinned")
            await expectPinningFailure({ try await fetch(url, wrongKey) }, mentioning: "public key")
        }
        try await both.shutdown()
        try await wrongKey.shutdown()
    }

    @Test func anExcludedHostIsLeftToSystemTrust() async throws {
        let certificates = try TestCertificates()
        let stranger = try TestCertificates()
        let pinning = try CertificatePinning(
            [PinnedHost("**.localhost", publicKeys: [keyPin(stranger.leaf)]), PinnedHost("localhost", publicKeys: [keyPin(stranger.leaf)])],
            excluding: ["localhost"]
        )
        let trusted = AsyncHTTPClientTransport(configuration: trusting(certificates), pinning: pinning)
        let untrusted = AsyncHTTPClientTransport(pinning: pinning)
        try await TLSTestServer.with(certificates, Hits().install) { url in
            try await fetch(url, trusted, expecting: "pinned")
            let error = await #expect(throws: TrellisError.self) { try await fetch(url, untrusted) }
            guard case .tlsFailed = error else {
                Issue.record("expected tlsFailed by system trust, got \(String(describing: error))")
                return
            }
        }
        try await trusted.shutdown()
        try await untrusted.shutdown()
    }

    @Test func onlyTheMatchingPatternApplies() async throws {
        let certificates = try TestCertificates()
        let stranger = try TestCertificates()
        // The wildcard rules pin a stranger's key; localhost matches none of them.
        let pinning = try CertificatePinning([
            PinnedHost("*.localhost", publicKeys: [keyPin(stranger.leaf)]),
            PinnedHost("**.example.com", publicKeys: [keyPin(stranger.leaf)]),
            PinnedHost("LOCALHOST", certificates: [pinned(certificates.leaf)]),
        ])
        let transport = AsyncHTTPClientTransport(pinning: pinning)
        try await TLSTestServer.with(certificates, Hits().install) { url in
            try await fetch(url, transport, expecting: "pinned")
        }
        try await transport.shutdown()
    }

    @Test func aClientWithPinsAndNoTransportMakesAPinnedOne() async throws {
        let certificates = try TestCertificates()
        let stranger = try TestCertificates()
        let good = try CertificatePinning([PinnedHost("localhost", certificates: [pinned(certificates.leaf)])])
        let bad = try CertificatePinning([PinnedHost("localhost", certificates: [pinned(stranger.leaf)])])
        try await TLSTestServer.with(certificates, Hits().install) { url in
            let request = try Trellis.Request(method: .get, url: url.appending(path: "pinned"))
            let client = Client(baseURL: url) { $0.security.pinning = good }
            let body = try await client.data(for: request).body
            #expect(String(decoding: body, as: UTF8.self) == "pinned")

            let refusing = Client(baseURL: url) { $0.security.pinning = bad }
            let refused = await #expect(throws: TrellisError.self) { try await refusing.perform(request) }
            guard case .pinningFailed = refused else {
                Issue.record("expected pinningFailed, got \(String(describing: refused))")
                return
            }

            // A transport made with other pins would skip the client's: every request fails.
            let mismatched = Client(baseURL: url, transport: AsyncHTTPClientTransport.shared) { $0.security.pinning = good }
            let error = await #expect(throws: TrellisError.self) { try await mismatched.perform(request) }
            guard case .invalidRequest(let problem) = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                return
            }
            #expect(problem.reason.contains("pins"))
        }
    }

    @Test func urlSessionOnLinuxRefusesAPinnedHostRatherThanSendUnchecked() async throws {
        #if !canImport(Darwin)
        let certificates = try TestCertificates()
        let hits = Hits()
        let pinning = try CertificatePinning([PinnedHost("localhost", certificates: [pinned(certificates.leaf)])])
        try await TLSTestServer.with(certificates, hits.install) { url in
            let client = Client(baseURL: url, transport: URLSessionTransport(pinning: pinning)) { $0.security.pinning = pinning }
            let error = await #expect(throws: TrellisError.self) {
                try await client.perform(Trellis.Request(method: .get, url: url.appending(path: "pinned")))
            }
            guard case .pinningFailed(let failure) = error else {
                Issue.record("expected pinningFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.reason.contains("AsyncHTTPClientTransport"))
        }
        #expect(hits.count.withLockedValue { $0 } == 0)
        #endif
    }
}

@Suite("Pinning configuration")
struct PinningConfigurationTests {
    @Test func patternsMatchExactlyOneLabelOrAnyDepth() throws {
        let key = try PublicKeyPin(String(repeating: "A", count: 43) + "=")
        let pinning = try CertificatePinning(
            [
                PinnedHost("api.example.com", publicKeys: [key]),
                PinnedHost("*.example.com", publicKeys: [key]),
                PinnedHost("**.cdn.example.net", publicKeys: [key]),
            ],
            excluding: ["status.example.com"]
        )
        #expect(pinning.pins(for: "API.Example.com")?.pattern == "api.example.com")
        #expect(pinning.pins(for: "www.example.com")?.pattern == "*.example.com")
        #expect(pinning.pins(for: "a.b.example.com") == nil)
        #expect(pinning.pins(for: "example.com") == nil)
        #expect(pinning.pins(for: "status.example.com") == nil)
        #expect(pinning.pins(for: "img.cdn.example.net")?.pattern == "**.cdn.example.net")
        #expect(pinning.pins(for: "a.b.cdn.example.net")?.pattern == "**.cdn.example.net")
        #expect(pinning.pins(for: "cdn.example.net") == nil)
        #expect(pinning.pins(for: "evilcdn.example.net") == nil)
    }

    @Test(arguments: ["", "https://api.example.com", "api.example.com:443", "api.*.com", "*example.com", ".example.com", "a..b"])
    func aMalformedPatternIsRefused(_ pattern: String) throws {
        let key = try PublicKeyPin(String(repeating: "A", count: 43) + "=")
        let error = #expect(throws: InvalidPin.self) { try PinnedHost(pattern, publicKeys: [key]) }
        #expect(error?.reason.contains("not a host pattern") == true)
    }

    @Test func malformedPinsAreRefusedWithTheReason() throws {
        #expect(throws: InvalidPin.self) { try PublicKeyPin("sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=") }
        #expect(throws: InvalidPin.self) { try PublicKeyPin("sha256/not base64!") }
        let short = #expect(throws: InvalidPin.self) { try PublicKeyPin("sha256/AAAA") }
        #expect(short?.reason.contains("3 bytes") == true)
        let empty = #expect(throws: InvalidPin.self) { try PinnedHost("api.example.com") }
        #expect(empty?.reason.contains("nothing") == true || empty?.reason.contains("no certificate") == true)
        #expect(throws: InvalidPin.self) { try PinnedCertificate(pem: "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n") }
        #expect(throws: InvalidPin.self) { try PinnedCertificate(der: [0x30, 0x03, 0x01]) }
    }

    @Test func caAndServerCertificatesCannotBeMixedForOneHost() throws {
        let certificates = try TestCertificates()
        let authority = try PinnedCertificate(der: certificates.authority.toDERBytes())
        let leaf = try PinnedCertificate(der: certificates.leaf.toDERBytes())
        let error = #expect(throws: InvalidPin.self) { try PinnedHost("localhost", certificates: [authority, leaf]) }
        #expect(error?.reason.contains("both CA certificates and server certificates") == true)
    }

    @Test func certificatesLoadFromPEMAndDERFiles() throws {
        let certificates = try TestCertificates()
        let directory = FileManager.default.temporaryDirectory.appending(path: "trellis-pins-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let der = try certificates.leaf.toDERBytes()
        let pem = "-----BEGIN CERTIFICATE-----\n" + Data(der).base64EncodedString(options: .lineLength64Characters)
            + "\n-----END CERTIFICATE-----\n"
        try Data(der).write(to: directory.appending(path: "leaf.der"))
        try Data(pem.utf8).write(to: directory.appending(path: "leaf.pem"))
        let fromDER = try PinnedCertificate(contentsOf: directory.appending(path: "leaf.der"))
        let fromPEM = try PinnedCertificate(contentsOf: directory.appending(path: "leaf.pem"))
        #expect(fromDER == fromPEM)
        #expect(fromDER.derBytes == der)
        let missing = #expect(throws: InvalidPin.self) { try PinnedCertificate(contentsOf: directory.appending(path: "absent.pem")) }
        #expect(missing?.reason.contains("absent.pem") == true)
    }

    /// The Connectivity article's openssl one-liner and ``PublicKeyPin`` agree.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
    func theReadmeOpensslCommandComputesTheSamePin() async throws {
        let certificates = try TestCertificates()
        let der = try certificates.leaf.toDERBytes()
        let file = FileManager.default.temporaryDirectory.appending(path: "trellis-pin-\(UUID().uuidString).pem")
        let pem = "-----BEGIN CERTIFICATE-----\n" + Data(der).base64EncodedString(options: .lineLength64Characters)
            + "\n-----END CERTIFICATE-----\n"
        try Data(pem.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let printedFile = FileManager.default.temporaryDirectory.appending(path: "trellis-pin-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: printedFile) }
        let process = try await ChildProcess(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "openssl x509 -in \"$1\" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | openssl base64",
                "sh", file.path,
            ],
            output: .file(printedFile), separateStandardError: true)
        #expect(try await process.terminationStatus().isSuccess)
        let printed = try String(contentsOf: printedFile, encoding: .utf8)
        let pin = try PinnedCertificate(der: der).publicKeyPin
        #expect(try PublicKeyPin(printed.trimmingCharacters(in: .whitespacesAndNewlines)) == pin)
    }
}
