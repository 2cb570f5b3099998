import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Testing
import Trellis
import TrellisTesting

/// Routes with each caching behaviour, counting what reaches the server.
private final class CacheRoutes: Sendable {
    private let counts = NIOLockedValueBox<[String: Int]>([:])
    let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"

    func hits(_ path: String) -> Int { counts.withLockedValue { $0[path] ?? 0 } }

    private func count(_ key: String) -> Int {
        counts.withLockedValue { counts in
            counts[key, default: 0] += 1
            return counts[key]!
        }
    }

    func install(_ router: Router<BasicRequestContext>) {
        router.get("c/fresh") { _, _ in Self.answer("fresh \(self.count("fresh"))", ["Cache-Control": "max-age=60"]) }
        router.get("c/nostore") { _, _ in Self.answer("nostore \(self.count("nostore"))", ["Cache-Control": "no-store, max-age=60"]) }
        router.get("c/etag") { request, _ in
            _ = self.count("etag")
            if request.headers[.ifNoneMatch] == "\"v1\"" {
                _ = self.count("etag-conditional")
                return Hummingbird.Response(status: .notModified, headers: [.eTag: "\"v1\"", .cacheControl: "no-cache", .init("X-Revalidated")!: "yes"])
            }
            return Self.answer("tagged body", ["ETag": "\"v1\"", "Cache-Control": "no-cache"])
        }
        router.get("c/modified") { request, _ in
            _ = self.count("modified")
            if request.headers[.ifModifiedSince] == self.lastModified {
                _ = self.count("modified-conditional")
                return Hummingbird.Response(status: .notModified)
            }
            return Self.answer("dated body", ["Last-Modified": self.lastModified, "Cache-Control": "max-age=0"])
        }
        router.get("c/vary") { request, _ in
            let language = request.headers[.acceptLanguage] ?? "none"
            return Self.answer("\(language) \(self.count("vary"))", ["Cache-Control": "max-age=60", "Vary": "Accept-Language"])
        }
        router.get("c/private") { _, _ in Self.answer("private \(self.count("private"))", ["Cache-Control": "max-age=60"]) }
        router.get("c/public") { _, _ in Self.answer("public \(self.count("public"))", ["Cache-Control": "public, max-age=60"]) }
        router.get("c/cookie") { _, _ in Self.answer("cookie \(self.count("cookie"))", ["Cache-Control": "max-age=60", "Set-Cookie": "seen=1; Path=/"]) }
    }

    private static func answer(_ text: String, _ headers: [String: String]) -> Hummingbird.Response {
        var fields = HTTPFields()
        for (name, value) in headers { fields[HTTPField.Name(name)!] = value }
        return Hummingbird.Response(status: .ok, headers: fields, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

@Suite("HTTP cache (RFC 9111) against the real server")
struct CacheIntegrationTests {
    private func text(_ client: Client, _ url: URL, _ path: String, _ change: (inout Trellis.Request) throws -> Void = { _ in }) async throws -> String {
        var request = try Trellis.Request(method: .get, url: url.appending(path: path))
        try change(&request)
        return String(decoding: try await client.data(for: request).body, as: UTF8.self)
    }

    @Test(arguments: TransportKind.allCases)
    func aFreshResponseIsServedWithoutTheNetworkAndNoStoreNeverIs(_ kind: TransportKind) async throws {
        let routes = CacheRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.useFrozenCache() }
            #expect(try await text(client, url, "c/fresh") == "fresh 1")
            #expect(try await text(client, url, "c/fresh") == "fresh 1")
            #expect(routes.hits("fresh") == 1)
            let cached = try await client.data(for: Trellis.Request(method: .get, url: url.appending(path: "c/fresh")))
            #expect(cached.headerFields[.age] != nil)

            #expect(try await text(client, url, "c/nostore") == "nostore 1")
            #expect(try await text(client, url, "c/nostore") == "nostore 2")

            // A download streams to its file and never goes through the cache.
            let downloaded = try await client.download(for: Trellis.Request(method: .get, url: url.appending(path: "c/fresh")))
            try? FileManager.default.removeItem(at: downloaded.url)
            #expect(routes.hits("fresh") == 2)
        }
    }

    /// Freshness follows the cache's clock: once its `max-age` has passed, a stored response
    /// is fetched again.
    @Test func aStoredResponseGoesStaleWhenItsClockPassesItsLifetime() async throws {
        let routes = CacheRoutes()
        let clock = ManualClock(advancesWhenSleeping: true)
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url) { $0.useFrozenCache(clock: clock) }
            let first = try await text(client, url, "c/fresh")
            clock.advance(by: .seconds(30))
            let halfway = try await text(client, url, "c/fresh")
            clock.advance(by: .seconds(31))
            let past = try await text(client, url, "c/fresh")
            #expect([first, halfway, past] == ["fresh 1", "fresh 1", "fresh 2"])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func staleResponsesAreRevalidatedWithETagAndLastModified(_ kind: TransportKind) async throws {
        let routes = CacheRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.useFrozenCache() }
            #expect(try await text(client, url, "c/etag") == "tagged body")
            let revalidated = try await client.data(for: Trellis.Request(method: .get, url: url.appending(path: "c/etag")))
            // The 304 is served as the stored 200, its body, and the 304's new headers.
            #expect(revalidated.status.code == 200)
            #expect(String(decoding: revalidated.body, as: UTF8.self) == "tagged body")
            #expect(revalidated.headerFields[HTTPField.Name("X-Revalidated")!] == "yes")
            #expect(routes.hits("etag-conditional") == 1)

            #expect(try await text(client, url, "c/modified") == "dated body")
            #expect(try await text(client, url, "c/modified") == "dated body")
            #expect(routes.hits("modified-conditional") == 1)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func varyAndCredentialsDecideWhatIsServed(_ kind: TransportKind) async throws {
        let routes = CacheRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.useFrozenCache() }
            func speaking(_ language: String) async throws -> String {
                try await text(client, url, "c/vary") { try $0.setHeader("Accept-Language", language) }
            }
            let answer1 = try await speaking("fr")
            #expect(answer1 == "fr 1")
            let answer2 = try await speaking("fr")
            #expect(answer2 == "fr 1")
            let answer3 = try await speaking("de")
            #expect(answer3 == "de 2")
            let answer4 = try await speaking("de")
            #expect(answer4 == "de 2")

            // With Authorization, only a response that says `public` is kept.
            let signed: (inout Trellis.Request) throws -> Void = { try $0.setHeader("Authorization", "Bearer t") }
            let answer5 = try await text(client, url, "c/private", signed)
            #expect(answer5 == "private 1")
            let answer6 = try await text(client, url, "c/private", signed)
            #expect(answer6 == "private 2")
            let answer7 = try await text(client, url, "c/public", signed)
            #expect(answer7 == "public 1")
            let answer8 = try await text(client, url, "c/public", signed)
            #expect(answer8 == "public 1")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func eachCachePolicyDoesWhatItSays(_ kind: TransportKind) async throws {
        let routes = CacheRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.useFrozenCache() }
            // Only if cached, with nothing stored: a 504 from the cache, and no request.
            let miss = await #expect(throws: TrellisError.self) {
                try await text(client, url, "c/fresh") { $0.cachePolicy = .onlyIfCached }
            }
            guard case .unacceptableStatus(let failure) = miss else {
                Issue.record("expected unacceptableStatus, got \(String(describing: miss))")
                return
            }
            #expect(failure.status.code == 504)
            #expect(routes.hits("fresh") == 0)

            #expect(try await text(client, url, "c/fresh") == "fresh 1")
            #expect(try await text(client, url, "c/fresh") { $0.cachePolicy = .onlyIfCached } == "fresh 1")
            // Reload: the network, whatever is stored; Yggdrasil's ignoreLocalCache too.
            #expect(try await text(client, url, "c/fresh") { $0.cachePolicy = .reload } == "fresh 2")
            let ignoring = try Trellis.Request(url: url.appending(path: "c/fresh").absoluteString, ignoreLocalCache: true)
            #expect(String(decoding: try await client.data(for: ignoring).body, as: UTF8.self) == "fresh 3")
            #expect(try await text(client, url, "c/fresh") == "fresh 3")

            // Cached else load: a stale stored response, served as it is.
            #expect(try await text(client, url, "c/etag") == "tagged body")
            #expect(try await text(client, url, "c/etag") { $0.cachePolicy = .cachedElseLoad } == "tagged body")
            #expect(routes.hits("etag") == 1)
        }
    }

    @Test func aDiskCacheServesANewClientAndRefusesATruncatedEntry() async throws {
        let routes = CacheRoutes()
        let directory = FileManager.default.temporaryDirectory.appending(path: "trellis-cache-\(UUID().uuidString)")
        let clock = ManualClock(advancesWhenSleeping: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await TestServer.with(routes.install) { url in
            let first = Client(baseURL: url) {
                $0.cache = try? HTTPCache(directory: directory)
                $0.clock = clock
            }
            #expect(try await text(first, url, "c/fresh") == "fresh 1")

            let second = Client(baseURL: url) {
                $0.cache = try? HTTPCache(directory: directory)
                $0.clock = clock
            }
            #expect(try await text(second, url, "c/fresh") == "fresh 1")
            #expect(routes.hits("fresh") == 1)

            // Cut the entry short, as a crash in the middle of a write by someone else would:
            // it is refused and the network answers.
            let entries = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".entry") }
            #expect(entries.count == 1)
            let file = directory.appending(path: try #require(entries.first))
            let whole = try Data(contentsOf: file)
            try whole.prefix(whole.count - 3).write(to: file)
            #expect(try await text(second, url, "c/fresh") == "fresh 2")
            #expect(try await text(second, url, "c/fresh") == "fresh 2")
        }
    }

    /// A stored response does not set its cookies again each time it is served.
    @Test func aCachedResponseSetsNoCookieAgain() async throws {
        let routes = CacheRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url) { $0.useFrozenCache() }
            let served1 = try await text(client, url, "c/cookie")
            #expect(served1 == "cookie 1")
            #expect(client.configuration.cookies?.cookies.map(\.name) == ["seen"])
            client.configuration.cookies?.removeAll()
            let served2 = try await text(client, url, "c/cookie")
            #expect(served2 == "cookie 1")
            #expect(client.configuration.cookies?.cookies.isEmpty == true)
        }
    }

    @Test func aBodyOverTheEntrySizeIsNotStored() async throws {
        let routes = CacheRoutes()
        try await TestServer.with(routes.install) { url in
            // "fresh 1" is 7 bytes: over an entry size of 6, every call goes to the server.
            let client = Client(baseURL: url) { $0.useFrozenCache(maximumEntrySize: 6) }
            let served3 = try await text(client, url, "c/fresh")
            #expect(served3 == "fresh 1")
            let served4 = try await text(client, url, "c/fresh")
            #expect(served4 == "fresh 2")
        }
    }

    @Test func theMemoryStoreEvictsTheLeastRecentlyUsed() async throws {
        let routes = CacheRoutes()
        try await TestServer.with(routes.install) { url in
            // Room for two entries, not three: each counts its key, URL, fields and body, about
            // 140 bytes for "fresh", 150 for "public" and 170 for "vary".
            let client = Client(baseURL: url) { $0.useFrozenCache(memoryCapacity: 360) }
            _ = try await text(client, url, "c/fresh")
            _ = try await text(client, url, "c/public")
            _ = try await text(client, url, "c/fresh")   // used again: the public one is older
            _ = try await text(client, url, "c/nostore")  // not stored, evicts nothing
            #expect(routes.hits("fresh") == 1)
            _ = try await text(client, url, "c/vary")     // stored: the public one goes
            _ = try await text(client, url, "c/public")
            #expect(routes.hits("public") == 2)
        }
    }
}

@Service
protocol CachedArticles {
    @GET("/c/fresh")
    func fresh() async throws -> String

    @GET("/c/fresh")
    @CachePolicy(.reload)
    func freshFromTheServer() async throws -> String
}

extension CacheIntegrationTests {
    @Test(arguments: TransportKind.allCases)
    func anEndpointsCachePolicyIsItsOwn(_ kind: TransportKind) async throws {
        let routes = CacheRoutes()
        try await TestServer.with(routes.install) { url in
            let articles = CachedArticlesService(client: Client(baseURL: url, transport: kind.transport) { $0.useFrozenCache() })
            let first = try await articles.fresh()
            let second = try await articles.fresh()
            let reloaded = try await articles.freshFromTheServer()
            let stored = try await articles.fresh()
            #expect([first, second, reloaded, stored] == ["fresh 1", "fresh 1", "fresh 2", "fresh 2"])
        }
    }
}
