import Foundation
import Testing
import Trellis

/// Every return type and parameter kind of a generated service, against a real server, over
/// both transports.
@Suite("Generated services against a real server")
struct ServiceIntegrationTests {
    private func withServices(
        _ kind: TransportKind,
        _ body: (BlogService, ProbeService) async throws -> Void
    ) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            try await body(BlogService(client: client), ProbeService(client: client))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func blogEndpoints(_ kind: TransportKind) async throws {
        try await withServices(kind) { blog, _ in
            #expect(try await blog.posts() == [Post(id: 1, title: "First"), Post(id: 2, title: "Second")])
            #expect(try await blog.post(id: 7) == Post(id: 7, title: "Post 7"))
            #expect(try await blog.create(post: NewPost(title: "Hello")) == Post(id: 100, title: "Hello"))
            try await blog.delete(id: 3)
            let head = try await blog.exists(id: 5)
            #expect(head.status == .ok)
            #expect(head.headerFields[.eTag] == "\"post-5\"")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func staticAndDynamicQueryAndDefaults(_ kind: TransportKind) async throws {
        try await withServices(kind) { blog, probe in
            let comments = try await blog.comments(id: 3, page: nil, tags: ["a b", "c&d"])
            #expect(comments == [Comment(id: 3, text: "sort=new&tags=a%20b&tags=c%26d")])

            let defaulted = try await blog.comments(page: 2, tags: [])
            #expect(defaulted == [Comment(id: 1, text: "sort=new&page=2")])

            let extra = try await blog.comments(id: 4, page: nil, tags: [], queryItems: [QueryItem(key: "author", value: "John Smith")])
            #expect(extra == [Comment(id: 4, text: "sort=new&author=John%20Smith")])

            let both = try await probe.defaults(kind: "things")
            #expect(both.path == "/echo/things/7")
            #expect(both.method == "PUT")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func hostilePathValuesStayOneSegment(_ kind: TransportKind) async throws {
        try await withServices(kind) { _, probe in
            // "." and ".." alone are refused (see the hostile-server tests).
            for value in ["../admin", "a/b?x=1#f", " ", "...", ".a", "100%", "ünï/cødé", "a+b=c;d"] {
                let echo = try await probe.segment(value: value)
                #expect(echo.segments.count == 3, "\(value) became \(echo.path)")
                #expect(echo.segments.last == value)
                #expect(echo.query.isEmpty)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func emptyOrNilPathValuesAreRejectedBeforeSending(_ kind: TransportKind) async throws {
        try await withServices(kind) { _, probe in
            let error = await #expect(throws: TrellisError.self) { try await probe.segment(value: "") }
            guard case .invalidRequest(let invalid) = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                return
            }
            #expect(invalid.part == .pathParameter("value"))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func queryValuesAreRenderedWithoutNoise(_ kind: TransportKind) async throws {
        try await withServices(kind) { _, probe in
            let date = Date(timeIntervalSince1970: 1_700_000_000)
            let full = try await probe.query(text: "a+b c", number: 42, flag: true, ratio: 0.5, sort: .top, tags: ["x", "y"], when: date)
            #expect(full.values(of: "fixed") == ["1"])
            #expect(full.values(of: "text") == ["a+b c"])
            #expect(full.values(of: "number") == ["42"])
            #expect(full.values(of: "flag") == ["true"])
            #expect(full.values(of: "ratio") == ["0.5"])
            #expect(full.values(of: "sort") == ["top"])
            #expect(full.values(of: "tags") == ["x", "y"])
            #expect(full.values(of: "when") == ["2023-11-14T22:13:20Z"])
            #expect(!full.query.contains("Optional"))

            let sparse = try await probe.query(text: nil, number: nil, flag: false, ratio: 1, sort: nil, tags: [], when: nil)
            #expect(sparse.queryItems.map(\.name) == ["fixed", "flag", "ratio"])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func bodiesCarryTheirContentType(_ kind: TransportKind) async throws {
        try await withServices(kind) { _, probe in
            let data = try await probe.send(data: Data([1, 2, 3]))
            #expect(data.header("Content-Type") == "application/octet-stream")
            #expect(data.body == "\u{1}\u{2}\u{3}")

            let text = try await probe.send(text: "héllo")
            #expect(text.header("Content-Type") == "text/plain; charset=utf-8")
            #expect(text.body == "héllo")

            let json = try await probe.send(post: NewPost(title: "T"))
            #expect(json.method == "PUT")
            #expect(json.header("Content-Type") == "application/json")
            #expect(json.body == #"{"title":"T"}"#)

            let vendor = try await probe.sendVendor(post: NewPost(title: "V"))
            #expect(vendor.header("Content-Type") == "application/vnd.trellis+json")

            let query = try await probe.queryMethod(text: "select *")
            #expect(query.method == "QUERY")
            #expect(query.body == "select *")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func formsArePercentEncoded(_ kind: TransportKind) async throws {
        try await withServices(kind) { _, probe in
            let fields = try await probe.form(name: "Zoë & Co", note: nil, tags: ["a=b", "c+d"])
            #expect(fields.header("Content-Type") == "application/x-www-form-urlencoded")
            #expect(fields.body == "name=Zo%C3%AB+%26+Co&tags=a%3Db&tags=c%2Bd")
            #expect(fields.query.isEmpty)

            let login = try await probe.form(login: Login(user: "me@example.com", password: "p&ss word", remember: true, scopes: ["read", "write"]))
            #expect(login.body == "user=me%40example.com&password=p%26ss+word&remember=true&scopes=read&scopes=write")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func headersFromParametersAndStaticLists(_ kind: TransportKind) async throws {
        try await withServices(kind) { _, probe in
            let echo = try await probe.headers(trace: "abc-123")
            #expect(echo.header("X-Trace") == "abc-123")
            #expect(echo.header("X-Static") == "yes")
            #expect(echo.header("Accept") == "application/json")

            let none = try await probe.headers(trace: nil)
            #expect(none.header("X-Trace") == nil)

            let error = await #expect(throws: TrellisError.self) { try await probe.headers(trace: "evil\r\nX-Injected: 1") }
            guard case .invalidRequest(let invalid) = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                return
            }
            #expect(invalid.part == .header("X-Trace"))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func otherMethods(_ kind: TransportKind) async throws {
        try await withServices(kind) { _, probe in
            let patch = try await probe.patch()
            let options = try await probe.options()
            #expect(patch.method == "PATCH")
            #expect(options.method == "OPTIONS")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func returnTypes(_ kind: TransportKind) async throws {
        try await withServices(kind) { _, probe in
            #expect(try await probe.text() == "héllo, world")
            #expect(try await probe.bytes() == TestRoutes.bytes)
            #expect(try await probe.noContent() == nil)
            #expect(try await probe.missing() == nil)
            #expect(try await probe.present(id: 9) == Post(id: 9, title: "Post 9"))
            let response = try await probe.response(id: 8)
            #expect(response.status == .ok)
            #expect(response.headerFields[.contentType] == "application/json")
            #expect(response.body == Post(id: 8, title: "Post 8"))
            try await probe.status(code: 204)
            try await probe.status(code: 205)
        }
    }
}
