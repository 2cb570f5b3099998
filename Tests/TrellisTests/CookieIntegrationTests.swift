import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOSSL
import Testing
@testable import Trellis
import TrellisTesting

/// Routes that set cookies and report the `Cookie` field each request carried.
private enum CookieRoutes {
    static func install(_ router: Router<BasicRequestContext>) {
        router.get("jar/login") { _, _ in
            setting(["session=abc123; Path=/; HttpOnly", "theme=dark; Path=/jar/prefs; Max-Age=3600; SameSite=Lax"])
        }
        router.get("jar/logout") { _, _ in setting(["session=; Path=/; Max-Age=0"]) }
        router.get("jar/secure") { _, _ in setting(["token=s3cret; Path=/; Secure", "plain=1; Path=/"]) }
        router.get("jar/commas") { _, _ in setting(["list=y, a=b; Path=/", "second=2; Path=/"]) }
        router.get("jar/overwrite") { _, _ in setting(["token=attacker; Path=/"]) }
        router.get("jar/prefixed") { _, _ in
            setting([
                "__Host-bare=1; Path=/", "__Secure-bare=1; Path=/", "__Host-ok=1; Secure; Path=/", "__Secure-ok=1; Secure; Path=/jar",
                "__Host-nopath=1; Secure", "__Host-domain=1; Secure; Path=/; Domain=localhost", "__HOST-case=1; Path=/",
            ])
        }
        router.get("jar/foreign") { _, _ in setting(["evil=1; Domain=example.com; Path=/", "tld=1; Domain=com; Path=/"]) }
        router.get("jar/wide") { _, _ in setting(["wide=1; Domain=localhost; Path=/"]) }
        router.get("jar/suffix") { _, _ in
            setting(["suffix=1; Domain=co.uk; Path=/", "dotted=1; Domain=.co.uk; Path=/", "site=1; Domain=example.co.uk; Path=/"])
        }
        router.get("jar/flood") { _, _ in
            let big = String(repeating: "x", count: 5000)
            return setting((0..<200).map { "flood\($0)=\($0); Path=/" } + ["huge=\(big); Path=/"])
        }
        router.get("jar/redirect") { request, _ in
            let target = request.uri.queryParameters["to"].map(String.init) ?? "/jar/echo"
            var headers = HTTPFields()
            headers[.location] = target
            headers.append(HTTPField(name: .setCookie, value: "hop=1; Path=/"))
            return Hummingbird.Response(status: .found, headers: headers)
        }
        router.get("jar/echo/**") { request, _ in echo(request) }
        router.get("jar/echo") { request, _ in echo(request) }
        router.get("jar/prefs/echo") { request, _ in echo(request) }
    }

    private static func setting(_ cookies: [String]) -> Hummingbird.Response {
        var headers = HTTPFields()
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Hummingbird.Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "ok")))
    }

    private static func echo(_ request: Hummingbird.Request) -> Hummingbird.Response {
        let cookies = request.headers[values: .cookie].joined(separator: " | ")
        return Hummingbird.Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: cookies)))
    }
}

@Suite("Cookies: a jar per client, against the real server")
struct CookieIntegrationTests {
    private func get(_ client: Client, _ url: URL, _ path: String) async throws -> String {
        let response = try await client.data(for: Trellis.Request(method: .get, url: url.appending(path: path)))
        return String(decoding: response.body, as: UTF8.self)
    }

    @Test(arguments: TransportKind.allCases)
    func cookiesAreKeptSentWherePathsMatchAndDeletedByMaxAgeZero(_ kind: TransportKind) async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let sent1 = try await get(client, url, "jar/echo")

            #expect(sent1 == "")
            _ = try await get(client, url, "jar/login")
            let sent2 = try await get(client, url, "jar/echo")

            #expect(sent2 == "session=abc123")
            // The longer path first, as RFC 6265 orders them.
            let sent3 = try await get(client, url, "jar/prefs/echo")

            #expect(sent3 == "theme=dark; session=abc123")
            let theme = try #require(client.configuration.cookies?.cookies.first { $0.name == "theme" })
            #expect(theme.sameSite == .lax)
            #expect(theme.expiresAt != nil)
            #expect(client.configuration.cookies?.cookies.first { $0.name == "session" }?.isHTTPOnly == true)

            _ = try await get(client, url, "jar/logout")
            let sent4 = try await get(client, url, "jar/echo")

            #expect(sent4 == "")
            let sent5 = try await get(client, url, "jar/prefs/echo")

            #expect(sent5 == "theme=dark")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aCookieGoesToItsHostAloneAndOtherDomainsAreRefused(_ kind: TransportKind) async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let port = try #require(url.port)
            let byName = try #require(URL(string: "http://localhost:\(port)"))
            let client = Client(baseURL: url, transport: kind.transport)
            _ = try await get(client, url, "jar/login")
            // 127.0.0.1 and localhost reach the same server, but are two hosts to a cookie.
            let sent6 = try await get(client, byName, "jar/echo")

            #expect(sent6 == "")
            let sent7 = try await get(client, url, "jar/echo")

            #expect(sent7 == "session=abc123")

            _ = try await get(client, url, "jar/foreign")
            #expect(client.configuration.cookies?.cookies.contains { $0.name == "evil" || $0.name == "tld" } == false)

            // A Domain equal to the host is kept for it (a single-label host such as localhost
            // counts as a public suffix, so for it alone).
            _ = try await get(client, byName, "jar/wide")
            let sent8 = try await get(client, byName, "jar/echo")

            #expect(sent8 == "wide=1")
            #expect(client.configuration.cookies?.cookies.first { $0.name == "wide" }?.isHostOnly == true)
        }
    }

    /// A site under a public suffix (`shop.example.co.uk`) may widen a cookie to its own
    /// domain, never to the suffix, where every other site under it would receive the cookie.
    /// The host names reach the test server through AsyncHTTPClient's DNS override; the check is
    /// the cookie stage's, the same over every transport.
    /// A cookie's `Max-Age` runs on the client's clock, as the cache's ages do: a client on a
    /// `ManualClock` sends `theme` (an hour) until the clock passes the hour, however long the
    /// test takes, and the session cookie (no expiry) after it.
    @Test func aCookiesLifetimeRunsOnTheClientsClock() async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let clock = ManualClock()
            let client = Client(baseURL: url) {
                $0.cookies = CookieJar()
                $0.clock = clock
            }
            func echoed() async throws -> String {
                let response = try await client.data(for: Trellis.Request(method: .get, url: url.appending(path: "jar/prefs/echo")))
                return String(decoding: response.body, as: UTF8.self)
            }
            _ = try await client.data(for: Trellis.Request(method: .get, url: url.appending(path: "jar/login")))
            #expect(try await echoed().contains("theme=dark"))
            clock.advance(by: .seconds(3599))
            #expect(try await echoed().contains("theme=dark"))
            clock.advance(by: .seconds(2))
            let after = try await echoed()
            #expect(!after.contains("theme=dark"), "\(after)")
            #expect(after.contains("session=abc123"), "\(after)")
        }
    }

    @Test func aCookieForAPublicSuffixIsRefusedFromAHostUnderIt() async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let port = try #require(url.port)
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            for host in ["shop.example.co.uk", "www.example.co.uk", "neighbour.co.uk"] { configuration.dnsOverride[host] = "127.0.0.1" }
            let transport = AsyncHTTPClientTransport(configuration: configuration)
            let client = Client(baseURL: url, transport: transport)
            func site(_ host: String) throws -> URL { try #require(URL(string: "http://\(host):\(port)")) }
            _ = try await get(client, try site("shop.example.co.uk"), "jar/suffix")

            #expect(client.configuration.cookies?.cookies.map(\.name) == ["site"])
            let sentToNeighbour = try await get(client, try site("neighbour.co.uk"), "jar/echo")
            #expect(sentToNeighbour == "")
            let sentToSibling = try await get(client, try site("www.example.co.uk"), "jar/echo")
            #expect(sentToSibling == "site=1")
            try await transport.shutdown()
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aSecureCookieIsRefusedOverPlainHTTP(_ kind: TransportKind) async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            _ = try await get(client, url, "jar/secure")
            let sent9 = try await get(client, url, "jar/echo")

            #expect(sent9 == "plain=1")
            #expect(client.configuration.cookies?.cookies.map(\.name) == ["plain"])
        }
    }

    /// A Secure cookie set over https stays with https: a plain request to the same host does
    /// not carry it, while the cookie that is not Secure goes to both.
    @Test func aSecureCookieSetOverHTTPSIsNotSentOverPlainHTTP() async throws {
        try await withSecureAndPlainServers { client, secureURL, plainURL in
            _ = try await get(client, secureURL, "jar/secure")
            #expect(try await get(client, secureURL, "jar/echo") == "token=s3cret; plain=1")
            #expect(try await get(client, plainURL, "jar/echo") == "plain=1")
        }
    }

    /// Runs `body` with a client whose transport trusts the test authority, an https server
    /// and a plain one on `localhost`, both with ``CookieRoutes``.
    private func withSecureAndPlainServers(_ body: (Client, URL, URL) async throws -> Void) async throws {
        let certificates = try TestCertificates()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([certificates.authority])
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.tlsConfiguration = tls
        let transport = AsyncHTTPClientTransport(configuration: configuration)
        try await TLSTestServer.with(certificates, CookieRoutes.install) { secureURL in
            try await TestServer.with(CookieRoutes.install) { plainURL in
                let plainPort = try #require(plainURL.port)
                let plainByName = try #require(URL(string: "http://localhost:\(plainPort)"))
                try await body(Client(baseURL: secureURL, transport: transport), secureURL, plainByName)
            }
        }
        try await transport.shutdown()
    }

    /// Each `Set-Cookie` field is one cookie, commas and all. URLSession folds the fields
    /// into one, which its transport splits again where a new cookie starts: there a field
    /// that itself holds `, name=` cannot be told from two.
    @Test(arguments: TransportKind.allCases)
    func eachSetCookieFieldIsOneCookie(_ kind: TransportKind) async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            _ = try await get(client, url, "jar/commas")
            let sent = try await get(client, url, "jar/echo")
            switch kind {
            case .asyncHTTPClient: #expect(sent == "list=y, a=b; second=2")
            case .urlSession: #expect(sent == "list=y; a=b; second=2")
            }
        }
    }

    /// A network attacker who answers one plain request must not replace the session cookie
    /// that only ever travels over https (RFC 6265bis section 5.7).
    @Test func aPlainHTTPResponseCannotOverwriteASecureCookie() async throws {
        try await withSecureAndPlainServers { client, secureURL, plainURL in
            _ = try await get(client, secureURL, "jar/secure")
            _ = try await get(client, plainURL, "jar/overwrite")
            #expect(try await get(client, secureURL, "jar/echo") == "token=s3cret; plain=1")
            #expect(try await get(client, plainURL, "jar/echo") == "plain=1")
        }
    }

    /// `__Secure-` and `__Host-` cookies are kept only when set as their prefixes promise
    /// (RFC 6265bis section 4.1.3): never over plain http, and a `__Host-` one only Secure,
    /// with `Path=/` and without `Domain`.
    @Test func cookiePrefixesAreEnforced() async throws {
        try await withSecureAndPlainServers { client, secureURL, plainURL in
            _ = try await get(client, plainURL, "jar/prefixed")
            #expect(try await get(client, secureURL, "jar/echo") == "")
            _ = try await get(client, secureURL, "jar/prefixed")
            #expect(try await get(client, secureURL, "jar/echo") == "__Secure-ok=1; __Host-ok=1")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func eachRedirectHopStoresAndSendsTheCookiesOfItsOwnURL(_ kind: TransportKind) async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let port = try #require(url.port)
            let client = Client(baseURL: url, transport: kind.transport)
            _ = try await get(client, url, "jar/login")
            // The 302 sets `hop`, and the next hop (same host) carries it with the session.
            let sent12 = try await get(client, url, "jar/redirect")

            #expect(sent12 == "session=abc123; hop=1")
            // To another host: that host has no cookies, and the first host's do not follow.
            let elsewhere = "http://localhost:\(port)/jar/echo"
            let response = try await client.data(for: Trellis.Request(method: .get, url: url.appending(path: "jar/redirect").appending(queryItems: [.init(name: "to", value: elsewhere)])))
            #expect(String(decoding: response.body, as: UTF8.self) == "")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aClientWithoutAJarKeepsAndSendsNothing(_ kind: TransportKind) async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.cookies = nil }
            _ = try await get(client, url, "jar/login")
            let sent13 = try await get(client, url, "jar/echo")

            #expect(sent13 == "")
            // A Cookie field the caller sets is sent as it is.
            var request = try Trellis.Request(method: .get, url: url.appending(path: "jar/echo"))
            try request.setHeader("Cookie", "mine=1")
            #expect(String(decoding: try await client.data(for: request).body, as: UTF8.self) == "mine=1")
        }
    }

    /// A server sending 200 cookies and one of 5,000 bytes: the jar keeps 50 for the host and
    /// refuses the oversized one.
    @Test(arguments: TransportKind.allCases)
    func aFloodOfCookiesIsBounded(_ kind: TransportKind) async throws {
        try await TestServer.with(CookieRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            _ = try await get(client, url, "jar/flood")
            let kept = try #require(client.configuration.cookies?.cookies)
            #expect(kept.count == CookieJar.maximumCookiesPerDomain)
            #expect(!kept.contains { $0.name == "huge" })
            // The newest are kept.
            #expect(kept.contains { $0.name == "flood199" })
            #expect(!kept.contains { $0.name == "flood0" })
        }
    }

    @Test func aFileBackedJarSurvivesANewClientAndIsPrivate() async throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "trellis-cookies-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appending(path: "cookies.json")
        try await TestServer.with(CookieRoutes.install) { url in
            let first = Client(baseURL: url) { $0.cookies = try? CookieJar(persistingTo: file) }
            _ = try await get(first, url, "jar/login")
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

            // A new jar on the same file: the persistent cookie is back, the session one is not.
            let second = Client(baseURL: url) { $0.cookies = try? CookieJar(persistingTo: file) }
            #expect(second.configuration.cookies != nil)
            let sent14 = try await get(second, url, "jar/prefs/echo")

            #expect(sent14 == "theme=dark")
            // No temporary file is left beside it.
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["cookies.json"])
        }
        // A file that is not a jar (cut short by something other than Trellis) is refused.
        try Data("[{\"name\":".utf8).write(to: file)
        let error = #expect(throws: TrellisError.self) { try CookieJar(persistingTo: file) }
        guard case .fileFailed(let failure) = error else {
            Issue.record("expected fileFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.reason.contains("not a cookie jar"))
    }
}

@Suite("Set-Cookie parsing (RFC 6265)")
struct SetCookieParsingTests {
    private func jar(storing fields: [String], from url: String) throws -> CookieJar {
        let jar = CookieJar()
        for field in fields { jar.add(setCookie: field, from: try #require(URL(string: url))) }
        return jar
    }

    @Test func expiresIsReadInTheFormsServersSend() throws {
        for form in ["Wed, 21 Oct 2037 07:28:00 GMT", "Wednesday, 21-Oct-37 07:28:00 GMT", "Wed Oct 21 07:28:00 2037", "21 Oct 2037 07:28:00"] {
            #expect(CookieDate.parse(form) == Date(timeIntervalSince1970: 2_139_722_880), "\(form)")
        }
        for unreadable in ["soon", "Wed, 31 Feb 2037 07:28:00 GMT", "Wed, 21 Oct 1600 07:28:00 GMT", "Wed, 21 Oct 2037 25:00:00 GMT"] {
            #expect(CookieDate.parse(unreadable) == nil, "\(unreadable)")
        }
        // An unreadable date leaves a session cookie; a far one is capped at 400 days.
        #expect(try jar(storing: ["a=1; Expires=soon"], from: "https://api.example.com/").cookies.first?.expiresAt == nil)
        let far = try #require(try jar(storing: ["a=1; Expires=Wed, 21 Oct 2999 07:28:00 GMT"], from: "https://api.example.com/").cookies.first?.expiresAt)
        #expect(far <= Date().addingTimeInterval(400 * 86_400))
    }

    @Test func foldedSetCookieFieldsAreSplitWhereANewCookieStarts() {
        #expect(SetCookieParser.unfolded("a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT, b=2; Path=/, c=3") == [
            "a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT", "b=2; Path=/", "c=3",
        ])
        #expect(SetCookieParser.unfolded("token=s3cret; Path=/; Secure") == ["token=s3cret; Path=/; Secure"])
    }

    @Test func maxAgeWinsOverExpiresAndAPastDateDeletes() throws {
        let jar = try jar(storing: ["a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Max-Age=60"], from: "https://api.example.com/")
        let expiry = try #require(jar.cookies.first?.expiresAt)
        #expect(expiry.timeIntervalSinceNow < 120)
        let deleted = jar.add(setCookie: "a=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT", from: try #require(URL(string: "https://api.example.com/")))
        #expect(deleted)
        #expect(jar.cookies.isEmpty)
    }

    @Test func domainsAndPathsAreScopedAsTheRFCSays() throws {
        let jar = try jar(
            storing: ["parent=1; Domain=.example.com; Path=/", "host=1", "deep=1; Path=/v1/users", "relative=1; Path=v1"],
            from: "https://api.example.com/v1/items"
        )
        func names(_ url: String) throws -> [String] { jar.cookies(for: try #require(URL(string: url))).map(\.name).sorted() }
        #expect(try names("https://api.example.com/v1/x") == ["host", "parent", "relative"])
        // Without Path, a cookie belongs to the request's directory.
        #expect(try names("https://api.example.com/") == ["parent"])
        #expect(try names("https://www.example.com/") == ["parent"])
        #expect(try names("https://api.example.com/v1/users/7") == ["deep", "host", "parent", "relative"])
        #expect(try names("https://api.example.com/v1/usersx") == ["host", "parent", "relative"])
        #expect(try names("https://example.org/") == [])
        // A path without a leading slash falls back to the request's directory.
        #expect(jar.cookies.first { $0.name == "relative" }?.path == "/v1")
    }

    @Test func malformedAndOversizedCookiesAreRefused() throws {
        let jar = try jar(
            storing: ["novalue", "=empty", "ctl=a\u{7}b", "line=a\u{0A}b", "big=" + String(repeating: "x", count: 4100), "ok=1"],
            from: "https://api.example.com/"
        )
        #expect(jar.cookies.map(\.name) == ["ok"])
    }

    /// The user agent's algorithm (RFC 6265 section 5.2), as browsers and curl read cookies:
    /// names and values are what lies around the first `=`, spaces, quotes, commas and UTF-8
    /// kept; one field is one cookie; an empty `Path` means the default path.
    @Test func namesAndValuesAreReadAsBrowsersReadThem() throws {
        let jar = try jar(
            storing: ["foo bar=baz", "q=\"quoted\"", "u=春节", "list=y, a=b", "eq=a=b", "p=1; Path=/dog; Path=", "t=\tx "],
            from: "https://api.example.com/v1/items"
        )
        let pairs = jar.cookies.map { "\($0.name)=\($0.value)" }
        #expect(pairs == ["foo bar=baz", "q=\"quoted\"", "u=春节", "list=y, a=b", "eq=a=b", "p=1", "t=x"])
        #expect(jar.cookies.first { $0.name == "p" }?.path == "/v1")
    }

    /// Found by `fuzz-set-cookie`: U+070F joins the `;` after it into one Character, and a
    /// split of the Characters kept `; other=x` in the value, which then went into the
    /// `Cookie` field as a second cookie. Fields are split by Unicode scalars.
    @Test func noDelimiterHidesInAGraphemeCluster() throws {
        let jar = try jar(storing: ["a=x\u{070F}; injected=1; Path=/", "b=\u{070F}=y"], from: "https://api.example.com/")
        #expect(jar.cookies.map(\.name) == ["a", "b"])
        #expect(jar.cookies.first?.value == "x\u{070F}")
        let header = jar.cookies(for: try #require(URL(string: "https://api.example.com/"))).map { "\($0.name)=\($0.value)" }
        #expect(!header.joined().contains("injected"))
    }

    @Test func aHostPrefixedCookieWithADomainIsNotSentToASibling() throws {
        let jar = try jar(storing: ["__Host-id=1; Secure; Path=/; Domain=example.com", "__Secure-id=2; Secure; Domain=example.com; Path=/"], from: "https://www.example.com/")
        #expect(jar.cookies(for: try #require(URL(string: "https://evil.example.com/"))).map(\.name) == ["__Secure-id"])
    }

    @Test func anIPAddressHostKeepsItsCookiesToItself() throws {
        let jar = try jar(storing: ["a=1; Domain=127.0.0.1", "b=1; Domain=0.0.1"], from: "http://127.0.0.1/")
        #expect(jar.cookies.map(\.name) == ["a"])
        #expect(jar.cookies.first?.isHostOnly == true)
    }

    @Test func theShippedPublicSuffixListKnowsEachKindOfRule() {
        let list = PublicSuffixes.list
        #expect(list.unreadable == nil)
        // Plain rules, from both the ICANN and the private part of the list.
        #expect(list.contains("co.uk") && list.contains("com") && list.contains("github.io"))
        #expect(!list.contains("example.co.uk") && !list.contains("example.com") && !list.contains("me.github.io"))
        // `*.ck` makes every child of `ck` a suffix, except `www.ck` (`!www.ck`).
        #expect(list.contains("anything.ck") && !list.contains("www.ck") && !list.contains("shop.anything.ck"))
        // A rule in Unicode (`公司.cn`) is kept in the form a request's host has.
        #expect(list.contains("xn--55qx5d.cn"))
        // Every single-label name is a suffix (the list's implicit `*`).
        #expect(list.contains("localdomain"))
        // Rules added to the list after 2023 (the copy compiled before was of 2023-02-09).
        #expect(list.contains("0am.jp") && list.contains("aem.live"))
    }

    /// A lookup is a binary search: a rule out of order would be missed.
    @Test func theShippedRulesAreSortedAndEachIsFound() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appending(path: "../../Sources/Trellis/Cookies/PublicSuffixList.txt")
        let rules = try String(contentsOf: file, encoding: .utf8).split(separator: "\n").filter { !$0.hasPrefix("//") }
        #expect(rules.count > 9_000)
        #expect(zip(rules, rules.dropFirst()).allSatisfy { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        let missed = rules.filter { rule in
            if rule.hasPrefix("!") { return PublicSuffixes.list.contains(String(rule.dropFirst())) }
            if rule.hasPrefix("*.") { return !PublicSuffixes.list.contains("child." + rule.dropFirst(2)) }
            return !PublicSuffixes.list.contains(String(rule))
        }
        #expect(missed.isEmpty)
        let small = PublicSuffixes(sortedRules: "!www.ck\n*.ck\nco.uk\nuk")
        #expect(small.contains("uk") && small.contains("co.uk") && small.contains("any.ck"))
        #expect(!small.contains("www.ck") && !small.contains("example.co.uk") && !small.contains("a.any.ck"))
    }

    /// Without its list, the jar holds every cookie to its host: a domain it cannot judge is
    /// taken for a public suffix.
    @Test func aMissingPublicSuffixListMakesEveryDomainASuffixAndSaysWhy() throws {
        let missing = URL(fileURLWithPath: "/nonexistent/\(UUID().uuidString)/PublicSuffixList.txt")
        let list = PublicSuffixes(contentsOf: [missing])
        #expect(list.unreadable?.contains(missing.path) == true)
        #expect(list.contains("example.com") && list.contains("co.uk"))
        #expect(String(describing: list).contains("unreadable"))

        let directory = FileManager.default.temporaryDirectory.appending(path: "trellis-suffixes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let written = directory.appending(path: "list.txt")
        try "// a comment\n// another\nco.uk\nuk\n".write(to: written, atomically: true, encoding: .utf8)
        let read = PublicSuffixes(contentsOf: [missing, written])
        #expect(read.unreadable == nil)
        #expect(read.contains("co.uk") && !read.contains("example.co.uk"))
        #expect(String(describing: read) == "PublicSuffixes(2 rules)")
    }

    @Test func aJarFileLoadsWithoutCookiesForAPublicSuffix() throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "trellis-jar-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appending(path: "cookies.json")
        let later = Date().addingTimeInterval(3_600)
        let written = [
            Cookie(name: "wide", value: "1", domain: "co.uk", isHostOnly: false, expiresAt: later),
            Cookie(name: "site", value: "1", domain: "example.co.uk", isHostOnly: false, expiresAt: later),
            Cookie(name: "own", value: "1", domain: "github.io", isHostOnly: true, expiresAt: later),
        ]
        try JSONEncoder().encode(written).write(to: file)
        let jar = try CookieJar(persistingTo: file)
        #expect(jar.cookies.map(\.name).sorted() == ["own", "site"])
    }

    @Test func aPublicSuffixThatIsTheHostItselfKeepsTheCookieToThatHost() throws {
        let atSuffix = try jar(storing: ["own=1; Domain=github.io; Path=/"], from: "https://github.io/")
        #expect(atSuffix.cookies.map(\.isHostOnly) == [true])
        let fromUnder = try jar(storing: ["up=1; Domain=github.io; Path=/", "mine=1; Domain=me.github.io"], from: "https://me.github.io/")
        #expect(fromUnder.cookies.map(\.name) == ["mine"])
        #expect(fromUnder.cookies(for: try #require(URL(string: "https://you.github.io/"))).isEmpty)
    }
}
