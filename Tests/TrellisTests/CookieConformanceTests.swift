import AsyncHTTPClient
import Foundation
import Testing
import Trellis

/// Adam Barth's `http-state` parser cases, end to end through a `Client` and its `CookieJar`,
/// as the suite's own server runs them: `GET /cookie-parser?<case>` answers `302` with the
/// case's `Set-Cookie` fields (and its `Location`, or `/cookie-parser-result?<case>`), and the
/// `Cookie` field the client then sends is compared with the case's expected one.
///
/// The cases are not part of this repository; `Scripts/cookie-conformance <checkout>` runs
/// this suite against a checkout of `http-state` (its `tests/data/parser` folder) and prints
/// the score. Without `TRELLIS_HTTP_STATE` the suite is skipped.
@Suite(
    "Cookies: the http-state conformance cases",
    .enabled(if: ProcessInfo.processInfo.environment["TRELLIS_HTTP_STATE"] != nil, "set TRELLIS_HTTP_STATE to run")
)
struct CookieConformanceTests {
    /// The names the cases use, all of them this machine (the suite's `hosts` file).
    private static let hosts = [
        "example.org", "home.example.org", "sibling.example.org", "subdomain.home.example.org", "sibling.home.example.org",
        // AsyncHTTPClient looks names up as written.
        "hoMe.eXaMplE.org",
    ]

    /// Cases the suite itself disables (their names start with `disabled-`) are left out.
    private static func cases(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder)
            .filter { $0.hasSuffix("-test") && !$0.hasPrefix("disabled") }
            .map { String($0.dropLast("-test".count)) }
            .sorted()
    }

    /// `Name: value` lines, as the suite's server reads them (leading space of the value
    /// dropped, the rest as it is).
    private static func fields(_ text: String) -> [(name: String, value: String)] {
        text.split(separator: "\n", omittingEmptySubsequences: true).compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            var value = line[line.index(after: colon)...]
            while value.first == " " || value.first == "\t" { value = value.dropFirst() }
            if value.last == "\r" { value = value.dropLast() }
            return (name, String(value))
        }
    }

    @Test func theParserCases() async throws {
        let folder = try #require(ProcessInfo.processInfo.environment["TRELLIS_HTTP_STATE"])
        let cases = try Self.cases(in: folder)
        try #require(!cases.isEmpty, "no cases in \(folder)")
        let portBox = PortBox()
        try await ScriptedServer.with { request in
            let components = request.target.split(separator: "?", maxSplits: 1)
            let path = components.first.map(String.init) ?? ""
            let name = components.count > 1 ? String(components[1]) : ""
            if path == "/cookie-parser" {
                // Three cases mean a date to come and wrote 2019; as the suite did for case 0003
                // ("futurified"), the year is moved on so that they test what they meant.
                let text = ((try? String(contentsOfFile: "\(folder)/\(name)-test", encoding: .utf8)) ?? "")
                    .replacingOccurrences(of: " 2019 ", with: " 2099 ")
                var lines = Self.fields(text).map { field in
                    field.name.lowercased() == "location"
                        ? "Location: " + field.value.replacingOccurrences(of: ":8888", with: ":\(portBox.port)")
                        : "\(field.name): \(field.value)"
                }
                if !lines.contains(where: { $0.hasPrefix("Location:") }) { lines.append("Location: /cookie-parser-result?\(name)") }
                return ScriptedServer.response("302 Found", lines)
            }
            return ScriptedServer.response("200 OK", [], body: request.field("Cookie") ?? "<none>")
        } _: { server in
            portBox.port = try #require(server.url.port)
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            for host in Self.hosts { configuration.dnsOverride[host] = "127.0.0.1" }
            let transport = AsyncHTTPClientTransport(configuration: configuration)
            var failures: [String] = []
            for name in cases {
                let expectedText = (try? String(contentsOfFile: "\(folder)/\(name)-expected", encoding: .utf8)) ?? ""
                let expected = Self.fields(expectedText).first { $0.name.lowercased() == "cookie" }?.value ?? "<none>"
                let client = Client(baseURL: server.url, transport: transport) { $0.cookies = CookieJar() }
                let url = try #require(URL(string: "http://home.example.org:\(portBox.port)/cookie-parser?\(name)"))
                let actual: String
                do {
                    actual = String(decoding: try await client.data(for: Request(method: .get, url: url)).body, as: UTF8.self)
                } catch {
                    actual = "error: \(error)"
                }
                if actual != expected { failures.append("\(name): sent \(actual) where \(expected) was expected") }
            }
            try await transport.shutdown()
            print("http-state: \(cases.count - failures.count) of \(cases.count) pass")
            for failure in failures { print("  \(failure)") }
            #expect(failures.isEmpty)
        }
    }
}

/// The server's port, known only once it has started, for the script that runs in it.
private final class PortBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    var port: Int {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}
