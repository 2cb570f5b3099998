import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
@testable import Trellis
import TrellisTesting

/// The pairs "Where features meet" once said cannot meet, each tried: what a call middleware
/// adds against hedges, what any stage adds against the per-origin state, the fleet's pause
/// against the rate limit's hold of a spent quota, and the fleet's circuit against hedges.
@Suite("Pairs that cannot meet, tried", .hangGuard)
struct CannotMeetTests {
    /// Sets `X-Call-ID` to a new value each time it runs.
    private struct CallIdentifier: Middleware {
        func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            var request = request
            request.headerFields[HTTPField.Name("X-Call-ID")!] = UUID().uuidString
            return try await next(request)
        }
    }

    /// A call middleware runs once per call, before the hedges: the first attempt and its hedge
    /// carry the one value it set, which a middleware run per attempt would have set twice.
    @Test func aCallMiddlewaresFieldsGoWithEveryHedge() async throws {
        let seen = NIOLockedValueBox(0)
        try await ScriptedServer.with({ _ in
            let number = seen.withLockedValue { $0 += 1; return $0 }
            return number == 1 ? ScriptedServer.noAnswer : ScriptedServer.response("200 OK", body: "hedge")
        }) { server in
            let client = Client(baseURL: server.url, middlewares: [CallIdentifier()]) {
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(1)))
            }
            _ = try await client.data(for: Request(method: .get, url: server.url.appending(path: "feed")))
            let identifiers = server.requests.map { $0.field("X-Call-ID") }
            #expect(identifiers.count == 2)
            #expect(Set(identifiers).count == 1 && identifiers[0] != nil, "\(identifiers)")
        }
    }

    /// Sends every call to `target` instead of where it was made, in `scope`.
    private struct Moving: Middleware {
        let target: URL
        let scope: MiddlewareScope

        func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            var request = request
            request.head.authority = target.host! + ":\(target.port!)"
            return try await next(request)
        }
    }

    /// What a request can carry besides its origin.
    enum Addition: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case callMiddlewareField, hopMiddlewareField, apiKeyInQuery, accessToken, defaultHeader, cookie, ownAcceptEncoding
        var testDescription: String { rawValue }
    }

    /// The per-origin state is the call's origin, whatever the request carries: once the
    /// origin's circuit is open, a call carrying each addition is refused by the same circuit,
    /// and nothing reaches the server. A call middleware that moves calls to another origin
    /// moves them to that origin's state; what hop stages do (a hop middleware, a redirect)
    /// does not move the call's state.
    @Test(arguments: Addition.allCases)
    func thePerOriginStateIsTheCallsOriginWhateverTheRequestCarries(_ addition: Addition) async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("503 Service Unavailable", ["Set-Cookie: seen=1; Path=/"]) }) { server in
            let jar = CookieJar()
            let base = Client(baseURL: server.url) {
                $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(1), coolDown: .seconds(60))
                $0.cookies = jar
                if addition == .defaultHeader { $0.defaultHeaders[HTTPField.Name("X-Default")!] = "on" }
                $0.accessTokens = AccessTokenSettings(storage: InMemoryAccessTokenStorage([
                    AccessTokenRequirement.defaultLabel: AccessToken(accessToken: "token", expiresIn: 3600),
                ]))
            }
            let plain = try Request(method: .get, url: server.url.appending(path: "orders"))
            #expect(try await base.data(for: plain, accepting: [503]).status.code == 503)

            var request = plain
            let client: Client
            switch addition {
            case .callMiddlewareField: client = base.adding(middlewares: [CallIdentifier()])
            case .hopMiddlewareField: client = base.adding(middlewares: [FeaturePairTests.TenantHeader(scope: .hop)])
            case .apiKeyInQuery: client = base.adding(middlewares: [try APIKey(.query("key"), "k")])
            case .accessToken:
                client = base
                request.requireAccessToken()
            case .defaultHeader, .cookie: client = base
            case .ownAcceptEncoding:
                client = base
                try request.setHeader("Accept-Encoding", "br")
            }
            let refusal = try await refusalOf(client, request)
            #expect(refusal.reason == .circuitOpen)
            #expect(server.requests.count == 1)
            if addition == .cookie { #expect(jar.cookies(for: server.url).count == 1) }

            // Moved by a call middleware, the call is the other origin's; by a hop middleware,
            // it stays this one's (and is refused).
            try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", body: "elsewhere") }) { elsewhere in
                let moved = try await base.adding(middlewares: [Moving(target: elsewhere.url, scope: .call)]).data(for: plain)
                #expect(String(decoding: moved.body, as: UTF8.self) == "elsewhere")
                let hop = try await refusalOf(base.adding(middlewares: [Moving(target: elsewhere.url, scope: .hop)]), plain)
                #expect(hop.reason == .circuitOpen)
                #expect(elsewhere.requests.count == 1)
            }
        }
    }

    /// A pause the fleet shares and this process's hold of a spent quota decide the same
    /// request: it waits out each in turn, so the later of the two lets it go. Here the fleet's
    /// pause ends at 1,000 s and the quota resets at 3,000 s: at 1,000 s the request is still
    /// held. (The storage counts the pause down in real time, which a loaded machine may spend
    /// seconds of before the call reads it: hence pauses far longer than that.)
    @Test func theFleetsPauseAndASpentQuotaAreWaitedOutInTurn() async throws {
        try await ScriptedServer.with({ received in
            switch received.target {
            case "/spend": ScriptedServer.response("200 OK", ["X-RateLimit-Remaining: 0", "X-RateLimit-Reset: 3000"])
            case "/pause": ScriptedServer.response("429 Too Many Requests", ["Retry-After: 1000"])
            default: ScriptedServer.response("200 OK", body: "ok")
            }
        }) { server in
            let store = SharedPauseTests.MemoryPauseStorage()
            let sharing = PauseSharing(storage: store, readEvery: .zero)
            let clock = ManualClock()
            let held = Client(baseURL: server.url) {
                $0.resilience.rateLimit = RateLimit(requests: 1000, per: .seconds(1), maximumWait: .seconds(3600))
                $0.resilience.sharedBackoff = SharedBackoff(maximumWait: .seconds(3600), sharing: sharing)
                $0.clock = clock
            }
            let told = Client(baseURL: server.url) { $0.resilience.sharedBackoff = SharedBackoff(maximumWait: .seconds(3600), sharing: sharing) }
            _ = try await held.data(for: Request(method: .get, url: server.url.appending(path: "spend")))
            _ = try await told.data(for: Request(method: .get, url: server.url.appending(path: "pause")), accepting: [429])
            for await _ in store.pausesTold { break }

            // The reading of the fleet's pauses sleeps on the clock too, for its time limit,
            // while the storage answers: only the longer sleeps are the waits.
            let limit = sharing.settings.timeLimit
            let call = Task { try await held.data(for: Request(method: .get, url: server.url.appending(path: "next"))) }
            await clock.sleepers(reaching: 1, longerThan: limit)
            let pause = try #require(clock.sleeps.first { $0 > limit })
            #expect(pause > .seconds(900) && pause <= .seconds(1000), "the fleet's pause first: \(clock.sleeps)")
            clock.advance(by: .seconds(1000))
            await clock.sleepers(reaching: 1, longerThan: limit)
            let waits = clock.sleeps.filter { $0 > limit }
            #expect(waits.count == 2 && waits[1] == .seconds(2000), "then what is left of the quota's hold: \(clock.sleeps)")
            #expect(!server.requests.contains { $0.target == "/next" })
            clock.advance(by: .seconds(2000))
            _ = try await call.value
            #expect(server.requests.map(\.target) == ["/spend", "/pause", "/next"])
        }
    }

    /// A circuit the fleet opened refuses each attempt before it is sent, hedges included: a
    /// hedged call of another process is refused, and neither it nor a hedge reaches the server.
    @Test func aCircuitTheFleetOpenedRefusesAHedgedCallAndItsHedges() async throws {
        try await SharedCircuitTests.withServer { server in
            let store = SharedPauseTests.MemoryPauseStorage()
            let sharing = PauseSharing(storage: store, readEvery: .zero)
            let opened = SharedCircuitTests.client(server.url, sharing)
            let hedged = Client(baseURL: server.url) {
                $0.resilience.circuitBreaker = CircuitBreaker(opensAfter: .consecutiveFailures(1), coolDown: .seconds(30), sharing: sharing)
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(1)), maximumHedges: 2)
            }
            let request = try Request(method: .get, url: server.url)
            #expect(try await opened.data(for: request, accepting: [503]).status.code == 503)
            for await _ in store.pausesTold { break }
            let refusal = try await refusalOf(hedged, request)
            #expect(refusal.reason == .circuitOpen)
            #expect(server.requests.count == 1)
        }
    }

    /// `https+unix` sends no server name (a socket's path names no server), so AsyncHTTPClient's
    /// TLS has none to check and refused every certificate. The certificate is checked against
    /// the client's own trust (no host pattern's settings or pins match a socket's path) and
    /// must name the request's `Host`, `localhost` unless the request sets one, as curl's
    /// `--unix-socket` checks the URL's host.
    @Test func overHTTPSOnAUnixSocketTheCertificateMustNameTheHostAndLeadToTheTrust() async throws {
        let certificates = try TestCertificates(leafNames: [.dnsName("docker.internal")])
        let authority = try TrustedCertificate.certificates(in: Data(try certificates.authority.toDERBytes()))
        let stranger = try TrustedCertificate.certificates(in: Data(try TestCertificates().authority.toDERBytes()))
        try await TestProgram.running({ try await .nginxOnUnixSocketOverTLS(certificates) }) { nginx in
            let url = URL.unixSocket(nginx.unixSocketPath, path: "/hello", tls: true)
            let trusting = Client(baseURL: url) { $0.connectivity.tls.trust = .only(authority) }
            var named = try Request(method: .get, url: url)
            try named.setHeader("Host", "docker.internal")
            let answer = try await trusting.data(for: named).body
            #expect(String(decoding: answer, as: UTF8.self) == "sni=", "no server name is sent")

            // The certificate names docker.internal, not localhost.
            let unnamed = await #expect(throws: TrellisError.self) { _ = try await trusting.data(for: Request(method: .get, url: url)) }
            guard case .tlsFailed(let mismatch) = unnamed else {
                Issue.record("expected tlsFailed, got \(String(describing: unnamed))")
                return
            }
            #expect("\(mismatch)".contains("does not name localhost"), "\(mismatch)")

            let untrusting = Client(baseURL: url) { $0.connectivity.tls.trust = .only(stranger) }
            let untrusted = await #expect(throws: TrellisError.self) { _ = try await untrusting.data(for: named) }
            guard case .tlsFailed = untrusted else {
                Issue.record("expected tlsFailed, got \(String(describing: untrusted))")
                return
            }
        }
    }
}
