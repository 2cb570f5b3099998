import Foundation
import HTTPTypes
import Testing
@testable import Trellis

/// `PlainHTTPPolicy.refusedExceptLoopback` judged for where the bytes go: a call to
/// `http://localhost` that an HTTP proxy (forwarding or tunnelling), a SOCKS5 proxy or a name
/// override would carry off loopback, credential and all, is refused before a byte leaves; a
/// route that stays on loopback is sent. Over AsyncHTTPClient (the client's own routes), for
/// WebSockets (the dialer's), and over URLSession, whose libcurl on Linux takes a proxy from the
/// environment.
@Suite("The plain-HTTP rule against the routes", .hangGuard)
struct PlainHTTPRouteTests {
    enum Route: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case forwardingProxy, tunnellingProxy, socks5Proxy, nameOverride
        var testDescription: String { rawValue }

        /// Settings that take `http://localhost:port` to `address` on `port`.
        func connectivity(to address: String, port: Int) -> Client.Configuration.Connectivity {
            var connectivity = Client.Configuration.Connectivity()
            switch self {
            case .forwardingProxy: connectivity.proxy = .always(.http(host: address, port: port))
            case .tunnellingProxy: connectivity.proxy = .always(.http(host: address, port: port, tunnelsPlainHTTP: true))
            case .socks5Proxy: connectivity.proxy = .always(.socks5(host: address, port: port))
            case .nameOverride: connectivity.nameOverrides = ["localhost": address]
            }
            return connectivity
        }
    }

    /// An address of TEST-NET-3, which reaches nothing: where a route leads on a machine with no
    /// address off loopback to trap it on.
    private static let nowhere = "203.0.113.1"

    private func refusal(_ error: TrellisError?, naming address: String) {
        guard case .invalidRequest(let invalid) = error else {
            Issue.record("expected the plain-HTTP rule's refusal, got \(String(describing: error))")
            return
        }
        #expect("\(invalid)".contains("PlainHTTPPolicy.refusedExceptLoopback"), "\(invalid)")
        #expect("\(invalid)".contains("would reach \(address)"), "\(invalid)")
    }

    /// Runs `body` with a trap off loopback (or `nil`, and an address that reaches nothing),
    /// the address `route` leads to, a client refusing plain HTTP but on loopback whose `route`
    /// leads there, and a request with a credential to `url` (its `PORT` the trap's).
    private static func offLoopback(
        _ route: Route,
        url template: String,
        version: Client.Configuration.HTTPVersionPreference = .http2WhenOffered,
        _ body: (TrapServer?, String, Client, Trellis.Request) async throws -> Void
    ) async throws {
        try await TrapServer.offLoopback { trap in
            let (address, port) = (trap?.address ?? Self.nowhere, trap?.port ?? 9)
            let url = URL(string: template.replacingOccurrences(of: "PORT", with: "\(port)"))!
            let client = Client(baseURL: url) {
                $0.security.plainHTTP = .refusedExceptLoopback
                $0.connectivity = route.connectivity(to: address, port: port)
                $0.connectivity.httpVersion = version
            }
            var request = try Trellis.Request(method: .get, url: url)
            request.headerFields[.authorization] = "Bearer route-secret"
            try await body(trap, address, client, request)
        }
    }

    /// Each route, over each HTTP version the client may speak (plain HTTP is HTTP/1.1 either
    /// way: the rule is judged before a connection is chosen).
    @Test(arguments: Route.allCases, [Client.Configuration.HTTPVersionPreference.http1Only, .http2WhenOffered])
    func aRouteOffLoopbackIsRefusedBeforeAByteLeaves(route: Route, version: Client.Configuration.HTTPVersionPreference) async throws {
        try await Self.offLoopback(route, url: "http://localhost:PORT/orders", version: version) { trap, address, client, request in
            let error = await #expect(throws: TrellisError.self) { _ = try await client.data(for: request) }
            refusal(error, naming: address)
            #expect(trap?.connections ?? 0 == 0)
            #expect(!(trap?.received.contains("route-secret") ?? false))
        }
    }

    @Test(arguments: Route.allCases)
    func aWebSocketRouteOffLoopbackIsRefusedBeforeAByteLeaves(route: Route) async throws {
        try await Self.offLoopback(route, url: "ws://localhost:PORT/feed") { trap, address, client, request in
            let error = await #expect(throws: TrellisError.self) { _ = try await client.webSocket(for: request) }
            refusal(error, naming: address)
            #expect(trap?.connections ?? 0 == 0)
        }
    }

    /// Proxies and a name override on loopback keep a plain call on the machine: it is sent. A
    /// made-up name that an override sends to `127.0.0.1` is judged by that address.
    @Test func aRouteThatStaysOnLoopbackIsSent() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", body: "ok") }) { origin in
            let port = origin.url.port!
            try await TestProgram.running({ try await .tinyproxy() }) { proxy in
                for tunnels in [false, true] {
                    let client = Client(baseURL: origin.url) {
                        $0.security.plainHTTP = .refusedExceptLoopback
                        $0.connectivity.proxy = .always(.http(host: "127.0.0.1", port: proxy.port, tunnelsPlainHTTP: tunnels))
                    }
                    _ = try await client.data(for: Trellis.Request(method: .get, url: origin.url.appending(path: "proxied")))
                }
            }
            try await TestProgram.running({ try await .microsocks() }) { socks in
                let client = Client(baseURL: origin.url) {
                    $0.security.plainHTTP = .refusedExceptLoopback
                    $0.connectivity.proxy = .always(.socks5(host: "127.0.0.1", port: socks.port))
                }
                _ = try await client.data(for: Trellis.Request(method: .get, url: origin.url.appending(path: "socks")))
            }
            let named = URL(string: "http://api.trellis.test:\(port)/overridden")!
            let overridden = Client(baseURL: named) {
                $0.security.plainHTTP = .refusedExceptLoopback
                $0.connectivity.nameOverrides = ["api.trellis.test": "127.0.0.1"]
            }
            _ = try await overridden.data(for: Trellis.Request(method: .get, url: named))
            // Two through tinyproxy, one through microsocks, one to the overridden name.
            #expect(origin.requests.count == 4)
        }
    }

    /// FoundationNetworking gives libcurl no proxy, and libcurl takes one from the environment:
    /// a route the client's settings never name. In a process whose `http_proxy` leads off
    /// loopback, a call to `http://localhost` goes there when plain HTTP is allowed, and is
    /// refused before a byte leaves when only loopback is.
    #if os(Linux)
    @Test func urlSessionsProxyFromTheEnvironmentIsJudgedToo() async throws {
        try await TrapServer.offLoopback { trap in
            let (address, port) = (trap?.address ?? Self.nowhere, trap?.port ?? 9)
            let environment = ["http_proxy": "http://\(address):\(port)", "no_proxy": "", "NO_PROXY": ""]
            let url = "http://localhost:1/orders"
            if let trap {
                let allowed = try await Self.worker(["url-session", url, "allowed"], environment: environment)
                #expect(allowed.contains("answered 200"), "\(allowed)")
                #expect(trap.received.contains("GET \(url)"), "\(trap.received)")
                #expect(trap.received.lowercased().contains("authorization: bearer fleet-worker-secret"))
            }
            let connections = trap?.connections ?? 0
            let refused = try await Self.worker(["url-session", url, "refusedExceptLoopback"], environment: environment)
            #expect(refused.contains("PlainHTTPPolicy.refusedExceptLoopback") && refused.contains("would reach \(address)"), "\(refused)")
            #expect(trap?.connections ?? 0 == connections)
        }
    }

    /// What a `trellis-fleet-worker` run with `arguments` and `environment` printed.
    private static func worker(_ arguments: [String], environment: [String: String]) async throws -> String {
        let output = FileManager.default.temporaryDirectory.appending(path: "trellis-url-session-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: output) }
        let executable = URL(filePath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: "trellis-fleet-worker")
        let process = try await ChildProcess(executable, arguments, environment: environment, output: .file(output))
        _ = try await process.terminationStatus()
        return (try? String(contentsOf: output, encoding: .utf8)) ?? ""
    }
    #endif

    /// The rule's own reading of hosts, whatever the route: names and addresses of loopback.
    @Test func loopbackIsNamesUnderLocalhostAndAddressesOfLoopback() {
        for host in ["localhost", "LOCALHOST.", "api.localhost", "127.0.0.1", "127.1", "127.255.0.9", "::1", "[::1]", "0:0:0:0:0:0:0:1"] {
            #expect(PlainHTTPPolicy.isLoopback(host), "\(host)")
        }
        for host in ["192.0.2.2", "localhost.example.com", "127.0.0.1.nip.io", "::ffff:7f00:1x", "10.0.0.1", ""] {
            #expect(!PlainHTTPPolicy.isLoopback(host), "\(host)")
        }
    }
}
