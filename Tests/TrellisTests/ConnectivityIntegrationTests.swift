import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOSSL
import Testing
import X509
@testable import Trellis

/// Proxies, name overrides and Unix sockets, against real programs: tinyproxy (an HTTP proxy)
/// and microsocks (a SOCKS5 proxy), started by the tests, in front of the in-process servers.
@Suite("Connectivity against real proxies and sockets", .serialized, .hangGuard)
struct ConnectivityIntegrationTests {
    /// An origin answering `ok` to everything, which records what it received.
    private func withOrigin<Result: Sendable>(_ body: (ScriptedServer) async throws -> Result) async throws -> Result {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", ["Content-Type: text/plain"], body: "ok") }, body)
    }

    private func text(_ client: Client, _ url: URL) async throws -> String {
        String(decoding: try await client.data(for: Trellis.Request(method: .get, url: url)).body, as: UTF8.self)
    }

    /// An `http://` request through an HTTP proxy is forwarded (the proxy adds its `Via` field,
    /// which a tunnel cannot), or tunnelled when the proxy says so.
    @Test(arguments: [false, true])
    func anHTTPProxyWithCredentialsCarriesTheCallAndTheOriginNeverSeesThem(tunnelsPlainHTTP: Bool) async throws {
        try await TestProgram.running({ try await .tinyproxy(["BasicAuth svc s3cret-pass"]) }) { proxy in
            try await withOrigin { origin in
                let client = Client(baseURL: origin.url) {
                    $0.connectivity.proxy = .always(.http(
                        host: "127.0.0.1", port: proxy.port, credentials: .init(username: "svc", password: "s3cret-pass"), tunnelsPlainHTTP: tunnelsPlainHTTP
                    ))
                }
                #expect(try await text(client, origin.url.appending(path: "hello")) == "ok")
                let received = try #require(origin.requests.first)
                #expect(received.target == "/hello")
                #expect(received.field("Proxy-Authorization") == nil)
                #expect((received.field("Via")?.contains("tinyproxy") ?? false) == !tunnelsPlainHTTP)
                let line = tunnelsPlainHTTP ? "CONNECT 127.0.0.1:\(origin.url.port!)" : "GET http://127.0.0.1:\(origin.url.port!)/hello"
                #expect(proxy.log.contains(line), "\(proxy.log)")
            }
        }
    }

    @Test func aProxyThatRefusesTheCredentialsFailsNamingItAndNotThePassword() async throws {
        try await TestProgram.running({ try await .tinyproxy(["BasicAuth svc s3cret-pass"]) }) { proxy in
            try await withOrigin { origin in
                // tinyproxy answers a forwarded request with wrong credentials 401, as an origin
                // would: only a tunnel can tell that refusal from the origin's.
                let attempts: [(Proxy.Credentials?, tunnels: Bool)] = [
                    (nil, false), (nil, true), (Proxy.Credentials(username: "svc", password: "wrong-pass"), true),
                ]
                for (credentials, tunnels) in attempts {
                    let client = Client(baseURL: origin.url) {
                        $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port, credentials: credentials, tunnelsPlainHTTP: tunnels))
                    }
                    let error = await #expect(throws: TrellisError.self) { try await text(client, origin.url) }
                    guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); continue }
                    #expect(failure.host == "http://\(credentials.map { "\($0.username):<redacted>@" } ?? "")127.0.0.1:\(proxy.port)")
                    // tinyproxy answers 407 without credentials, and 401 to wrong ones (AsyncHTTPClient
                    // reports no status but 407's): either way the proxy is named as what refused.
                    #expect(failure.reason.contains(credentials == nil ? "asks for credentials (407)" : "the proxy refused"))
                    #expect(!"\(error!)".contains("wrong-pass"))
                }
                #expect(origin.requests.isEmpty)
            }
        }
    }

    @Test(arguments: [false, true])
    func aChallengeIsAnsweredOnceAndItsCredentialsKept(tunnelsPlainHTTP: Bool) async throws {
        try await TestProgram.running({ try await .tinyproxy(["BasicAuth svc s3cret-pass"]) }) { proxy in
            try await withOrigin { origin in
                let asked = Counter()
                var settings = ProxySettings.always(.http(host: "127.0.0.1", port: proxy.port, tunnelsPlainHTTP: tunnelsPlainHTTP))
                settings.credentialsForChallenge = { _ in
                    await asked.increment()
                    return .init(username: "svc", password: "s3cret-pass")
                }
                let client = Client(baseURL: origin.url) { $0.connectivity.proxy = settings }
                let first = try await text(client, origin.url)
                let second = try await text(client, origin.url)
                #expect(first == "ok" && second == "ok")
                #expect(await asked.value == 1)
                #expect(origin.requests.count == 2)
                #expect(origin.requests.allSatisfy { $0.field("Proxy-Authorization") == nil })
            }
        }
    }

    @Test(arguments: [false, true])
    func aProxyThatKeepsAnswering407EndsTheCallAfterOneAnswer(tunnelsPlainHTTP: Bool) async throws {
        // A "proxy" that answers every request with 407.
        let challenge = ScriptedServer.response("407 Proxy Authentication Required", ["Proxy-Authenticate: Basic realm=\"corp\""])
        try await ScriptedServer.with({ _ in challenge }) { fakeProxy in
            let asked = Counter()
            let port = fakeProxy.url.port!
            var settings = ProxySettings.always(.http(host: "127.0.0.1", port: port, tunnelsPlainHTTP: tunnelsPlainHTTP))
            settings.credentialsForChallenge = { _ in
                await asked.increment()
                return .init(username: "svc", password: "never-right")
            }
            let client = Client(baseURL: URL(string: "http://origin.trellis.test")!) { $0.connectivity.proxy = settings }
            let error = await #expect(throws: TrellisError.self) { try await text(client, URL(string: "http://origin.trellis.test/x")!) }
            guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.host == "http://svc:<redacted>@127.0.0.1:\(port)")
            #expect(failure.reason.contains("refused the credentials sent to it (407)"))
            #expect(!"\(error!)".contains("never-right"))
            #expect(await asked.value == 1)
            #expect(fakeProxy.requests.count == 2)
            if tunnelsPlainHTTP {
                #expect(fakeProxy.requests.allSatisfy { $0.method == "CONNECT" && $0.target == "origin.trellis.test:80" })
            } else {
                #expect(fakeProxy.requests.allSatisfy { $0.method == "GET" && $0.target == "http://origin.trellis.test/x" })
            }
            #expect(fakeProxy.requests.last?.field("Proxy-Authorization") == "Basic " + Data("svc:never-right".utf8).base64EncodedString())
        }
    }

    /// A proxy's 407 is not the origin failing: the retry policy does not send the call again
    /// (the challenge callback is asked once per call), and the circuit breaker does not count
    /// it: three calls refused by the proxy, under a breaker that opens after two failures in
    /// a row, all reach the proxy. (Two in a row, not one: a one-off failure of a slow machine,
    /// a connection that broke, is a failure, and the 407s that follow reset the count.)
    @Test(arguments: [false, true])
    func aProxysRefusalOfCredentialsIsNotRetriedNorCountedAgainstTheOrigin(tunnelsPlainHTTP: Bool) async throws {
        let challenge = ScriptedServer.response("407 Proxy Authentication Required", ["Proxy-Authenticate: Basic realm=\"corp\""])
        try await ScriptedServer.with({ _ in challenge }) { fakeProxy in
            let asked = Counter()
            var settings = ProxySettings.always(.http(host: "127.0.0.1", port: fakeProxy.url.port!, tunnelsPlainHTTP: tunnelsPlainHTTP))
            settings.credentialsForChallenge = { _ in
                await asked.increment()
                return .init(username: "svc", password: "never-right")
            }
            let client = Client(baseURL: URL(string: "http://origin.trellis.test")!) {
                $0.connectivity.proxy = settings
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 3))
                $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(2))
            }
            for _ in 0..<3 {
                let error = await #expect(throws: TrellisError.self) { try await text(client, URL(string: "http://origin.trellis.test/x")!) }
                guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
                #expect(failure.reason.contains("(407)"))
            }
            // Each call asked once and sent twice; none was refused by an open circuit.
            #expect(await asked.value == 3)
            #expect(fakeProxy.requests.count == 6)
        }
    }

    @Test(arguments: [false, true])
    func aProxyThatAnswersNonsenseFailsNamingIt(tunnelsPlainHTTP: Bool) async throws {
        try await ScriptedServer.with({ _ in "SSH-2.0-OpenSSH_9.2\r\n\r\n" }) { nonsense in
            let port = nonsense.url.port!
            var connectivity = Client.Configuration.Connectivity()
            connectivity.proxy = .always(.http(host: "127.0.0.1", port: port, tunnelsPlainHTTP: tunnelsPlainHTTP))
            let transport = AsyncHTTPClientTransport(
                configuration: { var configuration = AsyncHTTPClientTransport.defaultConfiguration
                    configuration.timeout.connect = .milliseconds(500)
                    return configuration }(),
                connectivity: connectivity
            )
            let client = Client(baseURL: URL(string: "http://origin.trellis.test")!, transport: transport)
            let error = await #expect(throws: TrellisError.self) { try await text(client, URL(string: "http://origin.trellis.test/x")!) }
            guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.host == "http://127.0.0.1:\(port)")
            #expect(failure.reason.contains(tunnelsPlainHTTP ? "did not open the tunnel" : "not a valid HTTP"), "\(failure.reason)")
            try await transport.shutdown()
        }
    }

    @Test func aProxyThatRefusesTheTunnelFailsNamingItAndStillForwards() async throws {
        // Tunnels only to port 1: the origin's port is refused with a 403.
        try await TestProgram.running({ try await .tinyproxy(["ConnectPort 1"]) }) { proxy in
            try await withOrigin { origin in
                let tunnelling = Client(baseURL: origin.url) {
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port, tunnelsPlainHTTP: true))
                }
                let error = await #expect(throws: TrellisError.self) { try await text(tunnelling, origin.url) }
                guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
                #expect(failure.host == "http://127.0.0.1:\(proxy.port)")
                #expect(failure.reason.contains("refused the tunnel"))
                #expect(origin.requests.isEmpty)

                // The proxy forwards what it will not tunnel.
                let forwarding = Client(baseURL: origin.url) { $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port)) }
                let forwarded = try await text(forwarding, origin.url)
                #expect(forwarded == "ok")
                #expect(origin.requests.count == 1)
            }
        }
    }

    @Test(arguments: ["http", "https"])
    func aTunnelWhoseTwoHundredIsFollowedByGarbageFailsNamingTheProxy(scheme: String) async throws {
        // The "proxy" answers CONNECT 200 and, in the same write, bytes that are neither HTTP nor
        // TLS. AsyncHTTPClient then never takes the tunnel for open, and gives up on it at the
        // connect timeout, or the call's deadline holds.
        let established = "HTTP/1.1 200 Connection established\r\n\r\n\u{1}\u{2}\u{3} not a response\r\n\r\n"
        try await ScriptedServer.with({ _ in established }) { fakeProxy in
            let port = fakeProxy.url.port!
            var connectivity = Client.Configuration.Connectivity()
            connectivity.proxy = .always(.http(host: "127.0.0.1", port: port, tunnelsPlainHTTP: true))
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            configuration.timeout.connect = .milliseconds(300)
            let transport = AsyncHTTPClientTransport(configuration: configuration, connectivity: connectivity)
            let target = URL(string: "\(scheme)://origin.trellis.test/x")!
            let client = Client(baseURL: target, transport: transport) { $0.timeouts.request = .seconds(1) }
            let error = await #expect(throws: TrellisError.self) { try await text(client, target) }
            switch error {
            case .connectionFailed(let failure)?:
                #expect(failure.host == "http://127.0.0.1:\(port)")
                #expect(failure.reason.contains("did not open the tunnel"), "\(failure.reason)")
            case .timedOut?:
                // The pool tried once more after the connect timeout, until the call's deadline.
                break
            default:
                Issue.record("\(String(describing: error))")
            }
            #expect(fakeProxy.requests.first?.method == "CONNECT")
            try await transport.shutdown()
        }
    }

    @Test(arguments: [false, true])
    func aProxyThatStallsIsHeldToTheCallsDeadline(tunnelsPlainHTTP: Bool) async throws {
        // The tunnel opens, and then nothing answers; a forwarded request gets no answer at all.
        let script: ScriptedServer.Script = { request in
            request.method == "CONNECT" ? "HTTP/1.1 200 Connection established\r\n\r\n" : ScriptedServer.noAnswer
        }
        try await ScriptedServer.with(script) { fakeProxy in
            let target = URL(string: "http://origin.trellis.test/x")!
            let client = Client(baseURL: target) {
                $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: fakeProxy.url.port!, tunnelsPlainHTTP: tunnelsPlainHTTP))
                $0.timeouts.request = .milliseconds(300)
            }
            let error = await #expect(throws: TrellisError.self) { try await text(client, target) }
            guard case .timedOut = error else { Issue.record("\(String(describing: error))"); return }
        }
    }

    /// Runs `body` with a "proxy" that opens every tunnel and answers each request through it
    /// `201` "made" itself, and a client tunnelling `target`'s requests through it.
    private func throughATunnellingFake(_ body: (ScriptedServer, Client, URL) async throws -> Void) async throws {
        let script: ScriptedServer.Script = { request in
            request.method == "CONNECT" ? "HTTP/1.1 200 Connection established\r\n\r\n" : ScriptedServer.response("201 Created", body: "made")
        }
        try await ScriptedServer.with(script) { fakeProxy in
            let target = URL(string: "http://origin.trellis.test/things")!
            let client = Client(baseURL: target) {
                $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: fakeProxy.url.port!, tunnelsPlainHTTP: true))
            }
            try await body(fakeProxy, client, target)
        }
    }

    /// A proxy that relays each read as a write, with Nagle's algorithm on (tinyproxy), holds a
    /// body that reached it apart from its head until the server acknowledges the head: 40 ms.
    /// Through a tunnel the two leave in one segment, so the proxy reads them together.
    @Test func aRequestsHeadAndBodyReachTheTunnelInOneRead() async throws {
        try await throughATunnellingFake { fakeProxy, client, target in
            for _ in 0..<5 {
                let request = try Trellis.Request(method: .post, url: target, body: Trellis.RequestBody(#"{"name":"a thing"}"#, contentType: "application/json"))
                #expect(String(decoding: try await client.data(for: request).body, as: UTF8.self) == "made")
            }
            let posts = fakeProxy.requests.filter { $0.method == "POST" }
            #expect(posts.count == 5)
            #expect(posts.allSatisfy { $0.reads == 1 }, "reads per request: \(posts.map(\.reads))")
        }
    }

    /// The head waits for the body only while the loop finishes what it is doing: a stream whose
    /// first chunk comes once the server has the head does not wait for itself.
    @Test(.hangGuard) func aStreamedBodyThatWaitsForTheHeadToArriveIsSentThroughTheTunnel() async throws {
        try await throughATunnellingFake { fakeProxy, client, target in
            let heads = fakeProxy.headArrivals
            let chunks = AsyncStream<ByteBuffer> { continuation in
                Task {
                    for await head in heads where head.hasPrefix("POST") {
                        continuation.yield(ByteBuffer(string: "late"))
                        continuation.finish()
                        return
                    }
                }
            }
            let request = try Trellis.Request(method: .post, url: target, body: Trellis.RequestBody(stream: chunks, length: 4))
            #expect(String(decoding: try await client.data(for: request).body, as: UTF8.self) == "made")
        }
    }

    @Test func aProxyThatRedirectsTheTunnelIsNamedAndNotFollowed() async throws {
        let redirect = ScriptedServer.response("302 Found", ["Location: http://127.0.0.1:9/elsewhere"])
        try await ScriptedServer.with({ _ in redirect }) { fakeProxy in
            let target = URL(string: "https://origin.trellis.test/x")!
            let client = Client(baseURL: target) { $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: fakeProxy.url.port!)) }
            let error = await #expect(throws: TrellisError.self) { try await text(client, target) }
            guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.host == "http://127.0.0.1:\(fakeProxy.url.port!)")
            #expect(failure.reason.contains("refused the tunnel to origin.trellis.test"))
            #expect(fakeProxy.requests.map(\.method) == ["CONNECT"])
        }
    }

    @Test func anHTTPSCallThroughTheTunnelChecksTheOriginsPins() async throws {
        let certificates = try TestCertificates()
        let pinned = try CertificatePinning("localhost", certificates: [Data(try certificates.leaf.toDERBytes())])
        let stranger = try CertificatePinning("localhost", certificates: [Data(try TestCertificates().leaf.toDERBytes())])
        try await TestProgram.running({ try await .tinyproxy() }) { proxy in
            try await TLSTestServer.with(certificates, { $0.get("hello") { _, _ in "hi" } }) { url in
                let client = Client(baseURL: url) {
                    $0.security.pinning = pinned
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port))
                }
                let answer = try await text(client, url.appending(path: "hello"))
                #expect(answer == "hi")
                #expect(proxy.log.contains("CONNECT localhost:\(url.port!)"), "\(proxy.log)")

                let refusing = Client(baseURL: url) {
                    $0.security.pinning = stranger
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port))
                }
                let error = await #expect(throws: TrellisError.self) { try await text(refusing, url.appending(path: "hello")) }
                guard case .pinningFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
                #expect(failure.host.hasPrefix("localhost"))
            }
        }
    }

    @Test func http1OnlyNeverSpeaksHTTP2() async throws {
        try await HostileHTTP2Server.with { server in
            let trust = try TrustedCertificate.certificates(in: Data(try server.certificates.authority.toDERBytes()))
            let offered = Client(baseURL: server.url) { $0.connectivity.tls.trust = .only(trust) }
            let answer = try await text(offered, server.url.appending(path: "ok"))
            #expect(answer == "ok")
            #expect(server.requestedPaths == ["/ok"])
            // The server speaks HTTP/2 alone: a client that will not fails, and no stream opens.
            let http1 = Client(baseURL: server.url) {
                $0.connectivity.tls.trust = .only(trust)
                $0.connectivity.httpVersion = .http1Only
            }
            await #expect(throws: TrellisError.self) { try await text(http1, server.url.appending(path: "ok")) }
            #expect(server.requestedPaths == ["/ok"])
        }
    }

    @Test func aProxyThatCannotBeReachedFailsNamingItAndNoProxyGoesDirect() async throws {
        let deadPort = try await TestProgram.freePort()
        try await withOrigin { origin in
            let dead = Proxy.http(host: "127.0.0.1", port: deadPort)
            let through = Client(baseURL: origin.url) { $0.connectivity.proxy = .always(dead) }
            let error = await #expect(throws: TrellisError.self) { try await text(through, origin.url) }
            guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.host == "http://127.0.0.1:\(deadPort)")
            #expect(failure.reason.contains("cannot be reached"))

            let excluded = try NoProxy("localhost, 127.0.0.1")
            let direct = Client(baseURL: origin.url) { $0.connectivity.proxy = .always(dead, except: excluded) }
            #expect(try await text(direct, origin.url) == "ok")
        }
    }

    /// A SOCKS5 reply cut short (a domain of 255 bytes announced, 10 bytes sent) fails naming
    /// the proxy and what it did, as every other SOCKS5 failure does.
    @Test func aSOCKS5ReplyCutShortFailsNamingTheProxy() async throws {
        try await TruncatedSOCKSServer.with { socks in
            let client = Client(baseURL: URL(string: "http://127.0.0.1:9")!) {
                $0.connectivity.proxy = .always(.socks5(host: "127.0.0.1", port: socks.port))
            }
            let error = await #expect(throws: TrellisError.self) { try await text(client, URL(string: "http://127.0.0.1:9/x")!) }
            guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.host == "socks5://127.0.0.1:\(socks.port)")
            #expect(failure.reason.contains("SOCKS proxy closed the connection"), "\(failure)")
            #expect(!"\(failure)".contains("NoResult"))
        }
    }

    @Test func aSOCKS5ProxyCarriesTheCall() async throws {
        try await TestProgram.running({ try await .microsocks() }) { socks in
            try await withOrigin { origin in
                let client = Client(baseURL: origin.url) { $0.connectivity.proxy = .always(.socks5(host: "127.0.0.1", port: socks.port)) }
                let answer = try await text(client, origin.url)
                #expect(answer == "ok")
                #expect(origin.requests.count == 1)
                #expect(socks.log.contains("connected to 127.0.0.1:\(origin.url.port!)"), "\(socks.log)")
            }
            // The same settings with the proxy gone fail, naming it: the call went through it.
            try await socks.stop()
            try await withOrigin { origin in
                let client = Client(baseURL: origin.url) { $0.connectivity.proxy = .always(.socks5(host: "127.0.0.1", port: socks.port)) }
                let error = await #expect(throws: TrellisError.self) { try await text(client, origin.url) }
                guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
                #expect(failure.host == "socks5://127.0.0.1:\(socks.port)")
                #expect(origin.requests.isEmpty)
            }
        }
    }

    @Test func aDownloadGoesThroughTheProxyToo() async throws {
        let body = String(repeating: "trellis ", count: 64 * 1024)
        try await TestProgram.running({ try await .microsocks() }) { socks in
            try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", ["Content-Type: application/octet-stream"], body: body) }) { origin in
                let client = Client(baseURL: origin.url) { $0.connectivity.proxy = .always(.socks5(host: "127.0.0.1", port: socks.port)) }
                let destination = FileManager.default.temporaryDirectory.appending(path: "trellis-proxied-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: destination) }
                let file = try await client.download(for: Trellis.Request(method: .get, url: origin.url.appending(path: "file")), to: destination)
                #expect(try Data(contentsOf: file.url) == Data(body.utf8))
            }
            // With the proxy gone, the same download fails: it went through the proxy.
            try await socks.stop()
            try await withOrigin { origin in
                let client = Client(baseURL: origin.url) { $0.connectivity.proxy = .always(.socks5(host: "127.0.0.1", port: socks.port)) }
                let destination = FileManager.default.temporaryDirectory.appending(path: "trellis-proxied-\(UUID().uuidString)")
                await #expect(throws: TrellisError.self) {
                    try await client.download(for: Trellis.Request(method: .get, url: origin.url.appending(path: "file")), to: destination)
                }
                #expect(origin.requests.isEmpty)
            }
        }
    }

    /// A forwarded answer is held to the limits of a direct one: a body cut short fails, and a
    /// flood stops at the body limit with the connection closed (the flood ends at the server).
    @Test(.hangGuard) func aForwardedAnswerIsHeldToTheClientsLimits() async throws {
        try await TestProgram.running({ try await .tinyproxy() }) { proxy in
            try await HostileServer.with { server in
                let client = Client(baseURL: server.url) {
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port))
                    $0.limits.maximumBodySize = 1 << 20
                }
                let cut = await #expect(throws: TrellisError.self) { try await text(client, server.url.appending(path: "cut-short")) }
                guard case .connectionFailed(let failure)? = cut else { Issue.record("\(String(describing: cut))"); return }
                #expect(failure.reason.contains("closed the connection before the response was complete"), "\(failure.reason)")

                let flood = await #expect(throws: TrellisError.self) { try await text(client, server.url.appending(path: "flood")) }
                guard case .responseTooLarge? = flood else { Issue.record("\(String(describing: flood))"); return }
                var ended = server.floodEnded.makeAsyncIterator()
                #expect(await ended.next() != nil)
                #expect(proxy.log.contains("GET \(server.url.absoluteString)/flood"), "\(proxy.log)")
            }
        }
    }

    /// Each proxy a tunnel goes through gets a client of its own: a rule naming a new one for
    /// every destination ends with a clear error rather than clients without end.
    @Test func aProxyRuleNamingAProxyPerDestinationIsBounded() async throws {
        let client = Client(baseURL: URL(string: "https://h0.trellis.test")!) {
            $0.connectivity.proxy = .choosing { _, host, _ in
                .socks5(host: "127.0.0.1", port: 1 + Int(host.dropFirst().prefix { $0 != "." })!)
            }
            $0.timeouts.request = .seconds(5)
        }
        let limit = AsyncHTTPClientTransport.maximumOnDemandRoutes
        for index in 0..<limit {
            // Nothing speaks SOCKS on these ports: each call fails, but its route is made.
            await #expect(throws: TrellisError.self) { try await text(client, URL(string: "https://h\(index).trellis.test/")!) }
        }
        let error = await #expect(throws: TrellisError.self) { try await text(client, URL(string: "https://h\(limit).trellis.test/")!) }
        guard case .invalidRequest(let invalid) = error else { Issue.record("\(String(describing: error))"); return }
        #expect("\(invalid)".contains("already has \(limit) routes"), "\(invalid)")
        #expect("\(invalid)".contains("socks5://127.0.0.1:\(limit + 1)"), "\(invalid)")
    }

    @Test func oneConnectionPerHostCarriesConcurrentCallsInTurn() async throws {
        try await withOrigin { origin in
            let client = Client(baseURL: origin.url) { $0.connectivity.maximumConnectionsPerHost = 1 }
            try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<4 { group.addTask { try await text(client, origin.url) } }
                for try await answer in group { #expect(answer == "ok") }
            }
            // One connection: its requests are numbered 1 to 4.
            #expect(origin.requests.map(\.numberOnConnection).sorted() == [1, 2, 3, 4])
        }
    }

    @Test func aNameOverrideConnectsToTheAddressAndKeepsTheName() async throws {
        try await withOrigin { origin in
            let port = origin.url.port!
            let named = URL(string: "http://api.trellis.test:\(port)")!
            let client = Client(baseURL: named) { $0.connectivity.nameOverrides = ["api.trellis.test": "127.0.0.1"] }
            let answer = try await text(client, named.appending(path: "x"))
            #expect(answer == "ok")
            #expect(origin.requests.first?.field("Host") == "api.trellis.test:\(port)")
        }
    }

    @Test func aNameOverrideForOnePortLeavesTheOthersAlone() async throws {
        try await withOrigin { first in
            try await withOrigin { second in
                let (port, otherPort) = (first.url.port!, second.url.port!)
                let named = Client(baseURL: URL(string: "http://api.trellis.test:\(port)")!) {
                    $0.connectivity.nameOverrides = ["API.trellis.test:\(port)": "127.0.0.1"]
                }
                let answer = try await text(named, URL(string: "http://api.trellis.test:\(port)/x")!)
                #expect(answer == "ok")
                #expect(first.requests.first?.field("Host") == "api.trellis.test:\(port)")

                // localhost on the first port goes to 127.0.0.2, where nothing listens; on the
                // second it is looked up as always.
                let local = Client(baseURL: URL(string: "http://localhost:\(otherPort)")!) {
                    $0.connectivity.nameOverrides = ["localhost:\(port)": "127.0.0.2"]
                }
                let elsewhere = try await text(local, URL(string: "http://localhost:\(otherPort)/x")!)
                #expect(elsewhere == "ok")
                let error = await #expect(throws: TrellisError.self) { try await text(local, URL(string: "http://localhost:\(port)/x")!) }
                guard case .connectionFailed = error else { Issue.record("\(String(describing: error))"); return }
                #expect(first.requests.count == 1)
                #expect(second.requests.count == 1)
            }
        }
        for entry in [["https://api.example.com": "10.0.0.7"], ["api.example.com:99999": "10.0.0.7"], ["api.example.com": ""]] {
            let client = Client(baseURL: URL(string: "http://api.example.com")!) { $0.connectivity.nameOverrides = entry }
            let error = await #expect(throws: TrellisError.self) { try await text(client, URL(string: "http://api.example.com/x")!) }
            guard case .invalidRequest(let invalid) = error else { Issue.record("\(String(describing: error))"); continue }
            #expect("\(invalid)".contains("the name override \"\(entry.keys.first!)\""), "\(invalid)")
        }
    }

    @Test func aServiceOnAUnixSocketAnswersAndAMissingSocketIsNamed() async throws {
        let path = FileManager.default.temporaryDirectory.appending(path: "trellis-\(UUID().uuidString.prefix(8)).sock").path
        let router = Router()
        router.get("_ping") { _, _ in "OK" }
        router.get("containers/json") { _, _ in #"[{"Id":"abc","Names":["/web"]}]"# }
        try await TestServer.run({ onServerRunning, logger in
            Application(router: router, configuration: .init(address: .unixDomainSocket(path: path)), onServerRunning: onServerRunning, logger: logger)
        }) { _ in
            let docker = DockerService(baseURL: .unixSocket(path))
            let ping = try await docker.ping()
            let containers = try await docker.containers()
            #expect(ping == "OK")
            #expect(containers.map(\.Id) == ["abc"])
        }
        let missing = DockerService(baseURL: .unixSocket(path + ".gone"))
        let error = await #expect(throws: TrellisError.self) { try await missing.ping() }
        guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
        #expect(failure.host.contains(".gone"))
    }

    /// Over a Unix socket, a request carries `Host: localhost` (curl's `--unix-socket` sends
    /// the same), or the `Host` the caller set: nginx, like any server that follows RFC 9112,
    /// answers 400 without one.
    @Test func aRequestOverAUnixSocketCarriesAHostThatNginxAccepts() async throws {
        try await TestProgram.running({ try await .nginxOnUnixSocket() }) { nginx in
            let client = Client(baseURL: .unixSocket(nginx.unixSocketPath))
            let answer = try await text(client, .unixSocket(nginx.unixSocketPath, path: "/_ping"))
            #expect(answer == "host=localhost")
            var named = try Trellis.Request(method: .get, url: .unixSocket(nginx.unixSocketPath, path: "/_ping"))
            try named.setHeader("Host", "docker.internal")
            let overridden = try await client.data(for: named).body
            #expect(String(decoding: overridden, as: UTF8.self) == "host=docker.internal")
            // A socket never leaves the machine: no proxy applies to it, and it is not the
            // plain HTTP over a network that the plain-HTTP rule refuses.
            let strict = Client(baseURL: .unixSocket(nginx.unixSocketPath)) {
                $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: 9))
                $0.security.plainHTTP = .refused
            }
            let unproxied = try await text(strict, .unixSocket(nginx.unixSocketPath, path: "/_ping"))
            #expect(unproxied == "host=localhost")
        }
    }

    @Test func aPrivateAuthorityIsTrustedWhenGivenAndOnlyThen() async throws {
        let certificates = try TestCertificates()
        let authority = try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes()))
        try await TLSTestServer.with(certificates, { $0.get("hello") { _, _ in "hi" } }) { url in
            let untrusting = Client(baseURL: url)
            let error = await #expect(throws: TrellisError.self) { try await text(untrusting, url.appending(path: "hello")) }
            guard case .tlsFailed = error else { Issue.record("\(String(describing: error))"); return }

            let trusting = Client(baseURL: url) { $0.connectivity.tls.trust = .only(authority) }
            let answer = try await text(trusting, url.appending(path: "hello"))
            #expect(answer == "hi")
        }
    }

    @Test func aServerThatAsksForAClientCertificateGetsItFromPEMAndPKCS12() async throws {
        let certificates = try TestCertificates()
        let authority = try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes()))
        let identity = try certificates.clientIdentity(named: "trellis-client")
        let pkcs12 = try await Self.pkcs12(certificate: identity.certificate, key: identity.key, password: "p12-pass")
        try await TLSTestServer.requiringClientCertificates(certificates, { $0.get("hello") { _, _ in "hi" } }) { url in
            let anonymous = Client(baseURL: url) { $0.connectivity.tls.trust = .only(authority) }
            let error = await #expect(throws: TrellisError.self) { try await text(anonymous, url.appending(path: "hello")) }
            guard case .tlsFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.host.hasPrefix("localhost"))

            for clientIdentity in [
                try ClientIdentity.pem(certificateChain: Data(identity.certificate.utf8), privateKey: Data(identity.key.utf8)),
                try ClientIdentity.pkcs12(pkcs12, password: "p12-pass"),
            ] {
                let client = Client(baseURL: url) {
                    $0.connectivity.tls.trust = .only(authority)
                    $0.connectivity.tls.clientIdentity = clientIdentity
                }
                let answer = try await text(client, url.appending(path: "hello"))
                #expect(answer == "hi")
            }

            // An identity another authority signed is refused by the server, which is named.
            let strangerIdentity = try TestCertificates().clientIdentity(named: "stranger")
            let stranger = Client(baseURL: url) {
                $0.connectivity.tls.trust = .only(authority)
                $0.connectivity.tls.clientIdentity = try? ClientIdentity.pem(
                    certificateChain: Data(strangerIdentity.certificate.utf8), privateKey: Data(strangerIdentity.key.utf8)
                )
            }
            let refused = await #expect(throws: TrellisError.self) { try await text(stranger, url.appending(path: "hello")) }
            guard case .tlsFailed(let refusal) = refused else { Issue.record("\(String(describing: refused))"); return }
            #expect(refusal.host.hasPrefix("localhost"))
        }
        #expect(throws: TrellisError.self) { try ClientIdentity.pkcs12(pkcs12, password: "wrong") }
    }

    /// Through an HTTP proxy's tunnel and through SOCKS5, TLS is the origin's, end to end: the
    /// host pattern's private trust and client identity apply to the origin's name, and nginx
    /// gets the identity through either proxy; the origin's pins hold, and a pin of another
    /// certificate fails, through either.
    @Test func aTunnelKeepsTheOriginsTrustAndClientIdentity() async throws {
        let certificates = try TestCertificates()
        var privateTLS = TLSSettings()
        privateTLS.trust = .only(try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes())))
        let identity = try certificates.clientIdentity(named: "through-a-proxy")
        privateTLS.clientIdentity = try ClientIdentity.pem(certificateChain: Data(identity.certificate.utf8), privateKey: Data(identity.key.utf8))
        try await TestProgram.running({ try await .nginx(requiringClientsOf: certificates) }) { nginx in
            try await TestProgram.running({ try await .tinyproxy() }) { http in
                try await TestProgram.running({ try await .microsocks() }) { socks in
                    let url = URL(string: "https://localhost:\(nginx.port)")!
                    for proxy in [Proxy.http(host: "127.0.0.1", port: http.port), .socks5(host: "127.0.0.1", port: socks.port)] {
                        var connectivity = Client.Configuration.Connectivity()
                        try connectivity.setTLS(privateTLS, forHostsMatching: "localhost")
                        connectivity.proxy = .always(proxy)
                        let pinned = try CertificatePinning("localhost", certificates: [Data(try certificates.leaf.toDERBytes())])
                        let client = Client(baseURL: url) {
                            $0.connectivity = connectivity
                            $0.security.pinning = pinned
                        }
                        let subject = try await text(client, url)
                        #expect(subject == "CN=through-a-proxy", "through \(proxy.kind)")
                        let stranger = try CertificatePinning("localhost", certificates: [Data(try TestCertificates().leaf.toDERBytes())])
                        let refusing = Client(baseURL: url) {
                            $0.connectivity = connectivity
                            $0.security.pinning = stranger
                        }
                        let error = await #expect(throws: TrellisError.self) { try await text(refusing, url) }
                        guard case .pinningFailed = error else { Issue.record("through \(proxy.kind): \(String(describing: error))"); continue }
                    }
                    #expect(http.log.contains("CONNECT localhost:\(nginx.port)"), "\(http.log)")
                }
            }
        }
    }

    /// nginx (OpenSSL) asks for a client certificate: the right identity is taken; with none,
    /// or one another authority signed, nginx completes the handshake and answers 400 itself.
    @Test func nginxTakesTheRightClientCertificateAndRefusesTheOthers() async throws {
        let certificates = try TestCertificates()
        let authority = try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes()))
        let identity = try certificates.clientIdentity(named: "trellis-client")
        let strangerIdentity = try TestCertificates().clientIdentity(named: "stranger")
        try await TestProgram.running({ try await .nginx(requiringClientsOf: certificates) }) { nginx in
            let url = URL(string: "https://localhost:\(nginx.port)")!
            func client(presenting pem: (certificate: String, key: String)?) -> Client {
                Client(baseURL: url) {
                    $0.connectivity.tls.trust = .only(authority)
                    $0.connectivity.tls.clientIdentity = pem.flatMap {
                        try? ClientIdentity.pem(certificateChain: Data($0.certificate.utf8), privateKey: Data($0.key.utf8))
                    }
                }
            }
            let subject = try await text(client(presenting: identity), url)
            #expect(subject == "CN=trellis-client")
            for refused in [nil, strangerIdentity] {
                let error = await #expect(throws: TrellisError.self) { try await text(client(presenting: refused), url) }
                guard case .unacceptableStatus(let failure) = error else { Issue.record("\(String(describing: error))"); continue }
                #expect(failure.status.code == 400)
            }
        }
    }

    @Test func aMinimumTLSVersionRefusesAServerBelowIt() async throws {
        let certificates = try TestCertificates()
        let authority = try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes()))
        var tls12Only = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificates.leaf)], privateKey: .privateKey(certificates.leafKey)
        )
        tls12Only.maximumTLSVersion = .tlsv12
        try await TestServer.with(tls: tls12Only, { $0.get("hello") { _, _ in "hi" } }) { url in
            let lenient = Client(baseURL: url) { $0.connectivity.tls.trust = .only(authority) }
            let answer = try await text(lenient, url.appending(path: "hello"))
            #expect(answer == "hi")
            let strict = Client(baseURL: url) {
                $0.connectivity.tls.trust = .only(authority)
                $0.connectivity.tls.minimumVersion = .tls13
            }
            let error = await #expect(throws: TrellisError.self) { try await text(strict, url.appending(path: "hello")) }
            guard case .tlsFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.host.hasPrefix("localhost"))
        }
    }

    /// Over TLS, an overridden name is still the one the certificate is checked against.
    @Test func aNameOverrideKeepsTheNameForTheCertificateCheck() async throws {
        let certificates = try TestCertificates()
        let authority = try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes()))
        try await TLSTestServer.with(certificates, { $0.get("hello") { _, _ in "hi" } }) { url in
            let port = url.port!
            // localhost, connected at 127.0.0.1: the certificate names localhost, and passes.
            let same = Client(baseURL: url) {
                $0.connectivity.tls.trust = .only(authority)
                $0.connectivity.nameOverrides = ["localhost": "127.0.0.1"]
            }
            let answer = try await text(same, url.appending(path: "hello"))
            #expect(answer == "hi")
            // Another name at the same address: the certificate does not name it.
            let other = URL(string: "https://api.trellis.test:\(port)")!
            let elsewhere = Client(baseURL: other) {
                $0.connectivity.tls.trust = .only(authority)
                $0.connectivity.nameOverrides = ["api.trellis.test": "127.0.0.1"]
            }
            let error = await #expect(throws: TrellisError.self) { try await text(elsewhere, other.appending(path: "hello")) }
            guard case .tlsFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.host.hasPrefix("api.trellis.test"))
        }
    }

    /// A certificate that names the address connected to, and not the overridden name, is
    /// refused, as `curl --resolve` refuses it: swift-nio-ssl would accept it for its IP
    /// address. The same for a WebSocket, which dials on its own; and a name the certificate
    /// holds passes on either, on every port and on one.
    @Test func aNameOverrideDoesNotAcceptACertificateForTheAddress() async throws {
        let certificates = try TestCertificates(leafNames: [.dnsName("localhost"), .ipAddress(.init(contentBytes: [127, 0, 0, 1]))])
        let authority = try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes()))
        try await TLSTestServer.with(certificates, { $0.get("hello") { _, _ in "hi" } }) { url in
            let port = url.port!
            let other = URL(string: "https://example.test:\(port)")!
            for overrides in [["example.test": "127.0.0.1"], ["example.test:\(port)": "127.0.0.1"]] {
                let client = Client(baseURL: other) {
                    $0.connectivity.tls.trust = .only(authority)
                    $0.connectivity.nameOverrides = overrides
                }
                let error = await #expect(throws: TrellisError.self) { try await text(client, other.appending(path: "hello")) }
                guard case .tlsFailed(let failure) = error else { Issue.record("\(String(describing: error))"); continue }
                #expect(failure.reason.contains("does not name example.test"), "\(failure)")
            }
            let named = Client(baseURL: url) {
                $0.connectivity.tls.trust = .only(authority)
                $0.connectivity.nameOverrides = ["localhost": "127.0.0.1"]
            }
            let answer = try await text(named, url.appending(path: "hello"))
            #expect(answer == "hi")
        }
        let tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(certificates.leaf)], privateKey: .privateKey(certificates.leafKey))
        try await WebSocketTestServer.with(tls: tls, { $0.ws("echo", onUpgrade: WebSocketTestServer.echo) }) { url in
            let other = URL(string: "wss://example.test:\(url.port!)/echo")!
            let client = Client(baseURL: URL(string: "https://example.test:\(url.port!)")!) {
                $0.connectivity.tls.trust = .only(authority)
                $0.connectivity.nameOverrides = ["example.test": "127.0.0.1"]
            }
            let error = await #expect(throws: TrellisError.self) { try await client.webSocket(for: Trellis.Request(method: .get, url: other)) }
            guard case .tlsFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.reason.contains("does not name example.test"), "\(failure)")
        }
    }

    /// An overridden name keeps everything that is decided by the name: the pins of its
    /// pattern, the TLS settings of its pattern, and `Host`; a pin of another certificate still
    /// fails after the handshake to the overridden address.
    @Test func aNameOverrideKeepsThePinsAndTLSSettingsOfTheName() async throws {
        let certificates = try TestCertificates(leafNames: [.dnsName("api.trellis.test")])
        let authority = try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes()))
        try await TLSTestServer.with(certificates, { $0.get("hello") { request, _ in request.head.authority ?? "none" } }) { url in
            let named = URL(string: "https://api.trellis.test:\(url.port!)")!
            var privateTLS = TLSSettings()
            privateTLS.trust = .only(authority)
            var connectivity = Client.Configuration.Connectivity()
            try connectivity.setTLS(privateTLS, forHostsMatching: "*.trellis.test")
            connectivity.nameOverrides = ["api.trellis.test": "127.0.0.1"]
            for (pins, passes) in [(certificates, true), (try TestCertificates(leafNames: [.dnsName("api.trellis.test")]), false)] {
                let pinning = try CertificatePinning("*.trellis.test", certificates: [Data(try pins.leaf.toDERBytes())])
                let client = Client(baseURL: named) {
                    $0.connectivity = connectivity
                    $0.security.pinning = pinning
                }
                if passes {
                    let answer = try await text(client, named.appending(path: "hello"))
                    #expect(answer == "api.trellis.test:\(url.port!)")
                } else {
                    let error = await #expect(throws: TrellisError.self) { try await text(client, named.appending(path: "hello")) }
                    guard case .pinningFailed = error else { Issue.record("\(String(describing: error))"); continue }
                }
            }
        }
    }

    /// Through a proxy, the proxy resolves the name: a name override is for direct
    /// connections, and applies to a host the proxy settings leave out.
    @Test func aNameOverrideAppliesOnlyWhereNoProxyDoes() async throws {
        try await TestProgram.running({ try await .tinyproxy() }) { proxy in
            try await withOrigin { origin in
                let named = URL(string: "http://api.trellis.test:\(origin.url.port!)/x")!
                let proxied = Client(baseURL: named) {
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port, tunnelsPlainHTTP: true))
                    $0.connectivity.nameOverrides = ["api.trellis.test": "127.0.0.1"]
                }
                // tinyproxy cannot resolve the made-up name: the override did not apply.
                _ = try? await text(proxied, named)
                #expect(proxy.log.contains("CONNECT api.trellis.test:\(origin.url.port!)"), "\(proxy.log)")
                #expect(origin.requests.isEmpty)
                let excluded = try NoProxy("api.trellis.test")
                let direct = Client(baseURL: named) {
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port), except: excluded)
                    $0.connectivity.nameOverrides = ["api.trellis.test": "127.0.0.1"]
                }
                let answer = try await text(direct, named)
                #expect(answer == "ok")
                #expect(origin.requests.count == 1)
            }
        }
    }

    @Test func tlsSettingsForAHostPatternApplyToItsHostsAlone() async throws {
        let certificates = try TestCertificates()
        let identity = try certificates.clientIdentity(named: "trellis-client")
        var privateTLS = TLSSettings()
        privateTLS.trust = .only(try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes())))
        privateTLS.clientIdentity = try ClientIdentity.pem(certificateChain: Data(identity.certificate.utf8), privateKey: Data(identity.key.utf8))
        try await TLSTestServer.requiringClientCertificates(certificates, { $0.get("hello") { _, _ in "hi" } }) { url in
            var matching = Client.Configuration.Connectivity()
            try matching.setTLS(privateTLS, forHostsMatching: "localhost")
            let client = Client(baseURL: url) { $0.connectivity = matching }
            let answer = try await text(client, url.appending(path: "hello"))
            #expect(answer == "hi")

            var elsewhere = Client.Configuration.Connectivity()
            try elsewhere.setTLS(privateTLS, forHostsMatching: "*.privateTLS.example")
            let other = Client(baseURL: url) { $0.connectivity = elsewhere }
            let error = await #expect(throws: TrellisError.self) { try await text(other, url.appending(path: "hello")) }
            guard case .tlsFailed = error else { Issue.record("\(String(describing: error))"); return }
        }
        var invalid = Client.Configuration.Connectivity()
        #expect(throws: InvalidPin.self) { try invalid.setTLS(privateTLS, forHostsMatching: "https://x") }
    }

    /// A PKCS#12 archive of `certificate` and `key`, made by the openssl command.
    private static func pkcs12(certificate: String, key: String, password: String) async throws -> Data {
        let directory = FileManager.default.temporaryDirectory.appending(path: "trellis-p12-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try certificate.write(to: directory.appending(path: "cert.pem"), atomically: true, encoding: .utf8)
        try key.write(to: directory.appending(path: "key.pem"), atomically: true, encoding: .utf8)
        try await ChildProcess.runToEnd(
            URL(fileURLWithPath: "/usr/bin/openssl"),
            ["pkcs12", "-export", "-in", "cert.pem", "-inkey", "key.pem", "-passout", "pass:\(password)", "-out", "id.p12"], in: directory)
        return try Data(contentsOf: directory.appending(path: "id.p12"))
    }

    @Test func aWebSocketTakesTheNameOverride() async throws {
        try await WebSocketTestServer.with({ $0.ws("echo", onUpgrade: WebSocketTestServer.echo) }) { url in
            let port = url.port!
            let named = URL(string: "ws://chat.trellis.test:\(port)/echo")!
            let overriding = Client(baseURL: URL(string: "http://chat.trellis.test:\(port)")!) {
                $0.connectivity.nameOverrides = ["chat.trellis.test": "127.0.0.1"]
            }
            let socket = try await overriding.webSocket(for: Trellis.Request(method: .get, url: named))
            try await socket.send("hello")
            var messages = socket.messages.makeAsyncIterator()
            let echoed = try await messages.next()
            #expect(echoed == .text("hello"))
            await socket.close(.normalClosure, reason: "done")

        }
    }

    @Test func aWebSocketGoesThroughHTTPAndSOCKS5Proxies() async throws {
        try await WebSocketTestServer.with({ $0.ws("echo", onUpgrade: WebSocketTestServer.echo) }) { url in
            let echo = url.appending(path: "echo")
            try await TestProgram.running({ try await .tinyproxy(["BasicAuth svc s3cret-pass"]) }) { http in
                try await TestProgram.running({ try await .microsocks() }) { socks in
                    for proxy in [Proxy.http(host: "127.0.0.1", port: http.port, credentials: .init(username: "svc", password: "s3cret-pass")),
                                  .socks5(host: "127.0.0.1", port: socks.port)] {
                        let client = Client(baseURL: url) { $0.connectivity.proxy = .always(proxy) }
                        let socket = try await client.webSocket(for: Trellis.Request(method: .get, url: echo))
                        try await socket.send("through \(proxy.kind)")
                        var messages = socket.messages.makeAsyncIterator()
                        let echoed = try await messages.next()
                        #expect(echoed == .text("through \(proxy.kind)"))
                        await socket.close(.normalClosure, reason: "done")
                    }
                }
                // Without the credentials, the proxy's 407 is named.
                let refused = Client(baseURL: url) { $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: http.port)) }
                let error = await #expect(throws: TrellisError.self) { try await refused.webSocket(for: Trellis.Request(method: .get, url: echo)) }
                guard case .connectionFailed(let failure) = error else { Issue.record("\(String(describing: error))"); return }
                #expect(failure.host == "http://127.0.0.1:\(http.port)")
                #expect(failure.reason.contains("407"))
            }
        }
    }

    @Test func aSecureWebSocketThroughTheTunnelChecksTheOriginsPins() async throws {
        let certificates = try TestCertificates()
        let tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(certificates.leaf)], privateKey: .privateKey(certificates.leafKey))
        let pinned = try CertificatePinning("localhost", certificates: [Data(try certificates.leaf.toDERBytes())])
        let stranger = try CertificatePinning("localhost", certificates: [Data(try TestCertificates().leaf.toDERBytes())])
        try await TestProgram.running({ try await .tinyproxy() }) { proxy in
            try await WebSocketTestServer.with(tls: tls, { $0.ws("echo", onUpgrade: WebSocketTestServer.echo) }) { url in
                let echo = url.appending(path: "echo")
                let base = URL(string: "https://localhost:\(url.port!)")!
                let client = Client(baseURL: base) {
                    $0.security.pinning = pinned
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port))
                }
                let socket = try await client.webSocket(for: Trellis.Request(method: .get, url: echo))
                try await socket.send("through the tunnel")
                var messages = socket.messages.makeAsyncIterator()
                let echoed = try await messages.next()
                #expect(echoed == .text("through the tunnel"))
                await socket.close(.normalClosure, reason: "done")
                #expect(proxy.log.contains("CONNECT localhost:\(url.port!)"), "\(proxy.log)")

                let refusing = Client(baseURL: base) {
                    $0.security.pinning = stranger
                    $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port))
                }
                let error = await #expect(throws: TrellisError.self) { try await refusing.webSocket(for: Trellis.Request(method: .get, url: echo)) }
                guard case .pinningFailed = error else { Issue.record("\(String(describing: error))"); return }
            }
        }
    }

    // MARK: Rules, without a network

    @Test func noProxyMatchesAsCurlDoes() throws {
        let rule = try NoProxy(" localhost, .internal.example, example.org:8443, 10.0.0.0/8, ::1, [fd00::1]:9000 ")
        #expect(rule.matches(host: "localhost", port: 80))
        #expect(rule.matches(host: "internal.example", port: 443))
        #expect(rule.matches(host: "api.internal.example.", port: 443))
        #expect(!rule.matches(host: "notinternal.example", port: 443))
        #expect(rule.matches(host: "example.org", port: 8443))
        #expect(!rule.matches(host: "example.org", port: 443))
        #expect(rule.matches(host: "10.1.2.3", port: 80))
        #expect(!rule.matches(host: "11.1.2.3", port: 80))
        #expect(rule.matches(host: "[::1]", port: 80))
        #expect(rule.matches(host: "fd00::1", port: 9000))
        #expect(!rule.matches(host: "fd00::1", port: 9001))
        #expect(try NoProxy("*").matches(host: "anything.at.all", port: 1))
        #expect(throws: TrellisError.self) { try NoProxy("host:port") }
        #expect(throws: TrellisError.self) { try NoProxy("10.0.0.0/33") }
    }

    /// The host and port every route decision starts from (proxy rules, pins, TLS by host),
    /// read from the request's authority: the port after the last colon, unless that colon is
    /// inside an IPv6 address's brackets.
    @Test func aRequestsServerIsReadFromItsAuthority() throws {
        func server(_ url: String) throws -> String {
            let (host, port) = try Trellis.Request(method: .get, url: #require(URL(string: url))).server
            return "\(host) \(port)"
        }
        #expect(try server("http://example.com/x") == "example.com 80")
        #expect(try server("https://example.com/x") == "example.com 443")
        #expect(try server("HTTP://example.com:8080") == "example.com 8080")
        #expect(try server("https://[::1]:9000/") == "::1 9000")
        #expect(try server("https://[fd00::1]/") == "fd00::1 443")
        #expect(try server("http://xn--bcher-kva.example:81/") == "xn--bcher-kva.example 81")
        // Authorities a URL would not give: user information, letters outside ASCII.
        func server(authority: String) -> String {
            let (host, port) = Trellis.Request(head: HTTPRequest(method: .get, scheme: "https", authority: authority, path: "/")).server
            return "\(host) \(port)"
        }
        #expect(server(authority: "user:p%40ss@example.com:8443") == "example.com 8443")
        #expect(server(authority: "user@[::1]") == "::1 443")
        #expect(server(authority: "bücher.example:83") == "bücher.example 83")
    }

    @Test func theEnvironmentIsReadAsCurlReadsIt() throws {
        #expect(try Proxy.fromEnvironment([:]) == nil)
        // HTTP_PROXY in upper case is not read (a CGI server sets it from a request's header).
        #expect(try Proxy.fromEnvironment(["HTTP_PROXY": "http://evil:1"]) == nil)
        let settings = try #require(try Proxy.fromEnvironment([
            "https_proxy": "http://user:p%40ss@proxy.corp:3128", "HTTPS_PROXY": "http://ignored:1",
            "ALL_PROXY": "socks5h://socks.corp", "NO_PROXY": "localhost,.corp",
        ]))
        let https = try #require(settings.proxy(forScheme: "wss", host: "api.example.com", port: 443))
        #expect(https.host == "proxy.corp" && https.port == 3128 && https.credentials?.password == "p@ss")
        #expect(settings.proxy(forScheme: "http", host: "api.example.com", port: 80) == .socks5(host: "socks.corp", port: 1080))
        #expect(settings.proxy(forScheme: "https", host: "git.corp", port: 443) == nil)
        let error = #expect(throws: TrellisError.self) { try Proxy.fromEnvironment(["https_proxy": "ftp://u:secret@host"]) }
        #expect("\(error!)".contains("https_proxy"))
        #expect(!"\(error!)".contains("secret"))
    }

    @Test func urlSessionRefusesWhatItCannotApply() throws {
        var connectivity = Client.Configuration.Connectivity()
        connectivity.proxy = .choosing { _, _, _ in .http(host: "proxy", port: 3128) }
        connectivity.nameOverrides = ["api.example.com": "10.0.0.7"]
        let error = #expect(throws: TrellisError.self) { try URLSessionTransport(connectivity: connectivity) }
        #expect("\(error!)".contains("name overrides"), "\(error!)")
        #if canImport(Darwin)
        #expect("\(error!)".contains("a proxy chosen per destination"), "\(error!)")
        #else
        #expect("\(error!)".contains("FoundationNetworking on Linux ignores proxies"), "\(error!)")
        #endif
        // What it can apply, it takes.
        var connections = Client.Configuration.Connectivity()
        connections.maximumConnectionsPerHost = 2
        _ = try URLSessionTransport(connectivity: connections)
    }
}

private actor Counter {
    private(set) var value = 0
    func increment() { value += 1 }
}

private struct Container: Decodable, Sendable {
    // The name Docker gives the field.
    // swiftlint:disable:next identifier_name
    let Id: String
}

@Service
private protocol Docker {
    @GET("/_ping")
    func ping() async throws -> String

    @GET("/containers/json")
    func containers() async throws -> [Container]
}
