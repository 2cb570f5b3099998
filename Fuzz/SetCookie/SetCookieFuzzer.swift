// libFuzzer harness: one byte choosing the origin, then a Set-Cookie field value. Checks that
// reading it never crashes, that an accepted cookie is one the origin may set and one that
// can go back in a Cookie field (a name without `=` or `;`, no control character, within the
// size limit), that a jar that stores it writes a Cookie field without a line break, and that
// splitting a folded field loses nothing but the separators.
import Foundation
@testable import Trellis

private let origins = [
    SetCookieParser.Origin(host: "api.example.com", path: "/v1/items", secure: true),
    SetCookieParser.Origin(host: "example.co.uk", path: "/", secure: false),
    SetCookieParser.Origin(host: "127.0.0.1", path: "/a/b/", secure: false),
    SetCookieParser.Origin(host: "localhost", path: "", secure: true),
]
private let now = Date(timeIntervalSince1970: 1_800_000_000)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSetCookie(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    guard let first = bytes.first else { return 0 }
    let origin = origins[Int(first) % origins.count]
    let field = String(decoding: bytes.dropFirst(), as: UTF8.self)

    if case .accepted(let cookie) = SetCookieParser.parse(field, from: origin, now: now) {
        check(!cookie.name.isEmpty, "\(field): an empty name")
        // By scalars: a String's `contains` compares Characters by canonical equivalence, and
        // U+037E (Greek question mark, bytes CD BE) equals ";" there while it is no delimiter
        // on the wire.
        let smuggled = cookie.name.unicodeScalars.contains { $0 == "=" || $0 == ";" } || cookie.value.unicodeScalars.contains(";")
        check(!smuggled, "\(field): \(cookie.name)=\(cookie.value)")
        let controls = (cookie.name + cookie.value).unicodeScalars.contains { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }
        check(!controls, "\(field): a control character was kept")
        check(cookie.name.utf8.count + cookie.value.utf8.count <= SetCookieParser.maximumCookieSize, "\(field): too large")
        check(CookieDomain.domainMatches(host: origin.host, domain: cookie.domain), "\(field): domain \(cookie.domain) for \(origin.host)")
        check(cookie.path.hasPrefix("/"), "\(field): path \(cookie.path)")
        if cookie.isSecure { check(origin.secure, "\(field): Secure from plain http") }
        if let expiry = cookie.expiresAt { check(expiry.timeIntervalSince1970.isFinite, "\(field): expiry \(expiry)") }

        let jar = CookieJar()
        jar.add(cookie)
        if let scope = try? CookieScope(url: URL(string: "https://\(origin.host)\(cookie.path)") ?? URL(string: "https://\(origin.host)/")!),
            let header = jar.cookieHeader(for: scope, at: Date())
        {
            check(!header.contains("\r") && !header.contains("\n"), "\(field): a line break in \(header)")
        }
    }

    let pieces = SetCookieParser.unfolded(field)
    check(pieces.joined().filter { $0 != "," && $0 != " " && $0 != "\t" } == field.filter { $0 != "," && $0 != " " && $0 != "\t" },
          "\(field) unfolded into \(pieces)")
    return 0
}

@_cdecl("fuzz_set_cookie_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzSetCookie(data.map(UnsafeRawPointer.init), size) }
}
