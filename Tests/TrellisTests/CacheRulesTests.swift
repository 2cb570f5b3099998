import Foundation
import HTTPTypes
import Testing
import Trellis

/// The rules of RFC 9111 the cache-tests suite checks (`Scripts/cache-conformance`), each
/// also here against a ``ScriptedServer``, so that CI holds them without the suite.
@Suite("HTTP cache: the rules the conformance suite checks", .hangGuard)
struct CacheRulesTests {
    /// How many requests reached the server after `requests` calls to `path`, each sent
    /// with `requestFields`, through one client with a cache; and the last answer.
    private func served(
        _ fields: [String],
        status: String = "200 OK",
        requests: Int = 2,
        requestFields: [String: String] = [:]
    ) async throws -> (reachedServer: Int, last: Response<Data>) {
        try await ScriptedServer.with { _ in ScriptedServer.response(status, fields, body: "body") } _: { server in
            let client = Client(baseURL: server.url) {
                $0.useFrozenCache()
                $0.validation.acceptedStatuses = Set(200...599)
            }
            var last: Response<Data>?
            for number in 0..<requests {
                var request = try Request(method: .get, url: server.url.appending(path: "r"))
                if number > 0 {
                    for (name, value) in requestFields { request.headerFields[HTTPField.Name(name)!] = value }
                }
                last = try await client.data(for: request)
            }
            return (server.requests.count, try #require(last))
        }
    }

    private static func date(_ offset: TimeInterval) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date().addingTimeInterval(offset))
    }

    @Test func aLastModifiedGivesAHeuristicLifetimeToAHeuristicallyCacheableStatus() async throws {
        let lastModified = "Last-Modified: \(Self.date(-100_000))"
        #expect(try await served([lastModified, "Date: \(Self.date(0))"]).reachedServer == 1)
        // Not to a status that is not heuristically cacheable.
        #expect(try await served([lastModified, "Date: \(Self.date(0))"], status: "500 Internal Server Error").reachedServer == 2)
    }

    @Test(arguments: ["400 Bad Request", "500 Internal Server Error", "503 Service Unavailable", "599 Odd"])
    func anyFinalStatusWithExplicitFreshnessIsStored(_ status: String) async throws {
        #expect(try await served(["Cache-Control: max-age=3600"], status: status).reachedServer == 1)
    }

    @Test func anExpiresWithRunsOfSpacesIsAlreadyExpired() async throws {
        let spaced = Self.date(3600).replacingOccurrences(of: " ", with: "  ")
        #expect(try await served(["Expires: \(spaced)"]).reachedServer == 2)
        #expect(try await served(["Expires: \(Self.date(3600))"]).reachedServer == 1)
    }

    @Test func aQualifiedNoCacheServesTheResponseWithoutTheFieldsItNames() async throws {
        let (reached, last) = try await served(["Cache-Control: max-age=3600, no-cache=\"a, b\"", "a: 1", "b: 2", "c: 3"])
        #expect(reached == 1)
        #expect(last.headerFields[HTTPField.Name("a")!] == nil)
        #expect(last.headerFields[HTTPField.Name("b")!] == nil)
        #expect(last.headerFields[HTTPField.Name("c")!] == "3")
    }

    /// A comma after U+070F is one Character with it; read by Characters, `no-store` was part
    /// of an unknown directive and the response was stored.
    @Test func noDirectiveHidesInAGraphemeCluster() async throws {
        #expect(try await served(["Cache-Control: max-age=600, \u{070F},no-store"]).reachedServer == 2)
    }

    @Test func theFieldsConnectionNamesAreNotStored() async throws {
        let (reached, last) = try await served(["Cache-Control: max-age=3600", "Connection: a", "a: 1", "c: 3"])
        #expect(reached == 1)
        #expect(last.headerFields[HTTPField.Name("a")!] == nil)
        #expect(last.headerFields[HTTPField.Name("c")!] == "3")
    }

    @Test func mustUnderstandStoresAStatusTheCacheUnderstandsDespiteNoStore() async throws {
        #expect(try await served(["Cache-Control: max-age=3600, no-store, must-understand"]).reachedServer == 1)
        #expect(try await served(["Cache-Control: max-age=3600, no-store, must-understand"], status: "599 Odd").reachedServer == 2)
    }

    @Test func theRequestsDirectivesAreHonoured() async throws {
        let stale = ["Cache-Control: max-age=1", "Age: 100"]
        #expect(try await served(stale, requestFields: ["Cache-Control": "max-stale"]).reachedServer == 1)
        #expect(try await served(stale, requestFields: ["Cache-Control": "max-stale=10"]).reachedServer == 2)
        #expect(try await served(["Cache-Control: max-age=1, must-revalidate", "Age: 100"], requestFields: ["Cache-Control": "max-stale"]).reachedServer == 2)
        #expect(try await served(["Cache-Control: max-age=3600"], requestFields: ["Cache-Control": "min-fresh=7200"]).reachedServer == 2)
        #expect(try await served(["Cache-Control: max-age=3600", "Age: 600"], requestFields: ["Cache-Control": "max-age=60"]).reachedServer == 2)
    }

    @Test func anImmutableFreshResponseIsServedToANoCacheRequest() async throws {
        #expect(try await served(["Cache-Control: max-age=3600, immutable"], requestFields: ["Cache-Control": "no-cache"]).reachedServer == 1)
        #expect(try await served(["Cache-Control: max-age=3600"], requestFields: ["Cache-Control": "no-cache"]).reachedServer == 2)
    }
}
