// libFuzzer harness: a `Retry-After` value as a server might send it, and eight bytes taken
// as a date. Checks that parsing never crashes or traps on arithmetic, that a delay is never
// negative, that a value of digits is that many seconds (saturating), and that every date
// written in each of the three HTTP date forms parses back to itself.
import Foundation
@testable import Trellis

private let now = Date(timeIntervalSince1970: 1_800_000_000)

private func formatter(_ format: String) -> DateFormatter {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = format
    return formatter
}

private let forms = [
    formatter("EEE, dd MMM yyyy HH:mm:ss 'GMT'"),
    formatter("EEEE, dd-MMM-yy HH:mm:ss 'GMT'"),
    formatter("EEE MMM d HH:mm:ss yyyy"),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRetryAfter(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let text = String(decoding: bytes, as: UTF8.self)
    if let delay = RetryAfter.delay(text, now: now) {
        check(delay >= .zero, "\(text) gave a negative delay \(delay)")
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (48...57).contains($0) }) {
            check(delay == .saturating(seconds: Double(trimmed) ?? .infinity), "\(trimmed) seconds gave \(delay)")
        }
    }

    guard bytes.count >= 8 else { return 0 }
    // A whole second from 1970 to 2039: the two-digit year of the RFC 850 form is read within
    // a window around today, so later dates would come back a century early.
    let raw = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    let date = Date(timeIntervalSince1970: Double(raw % 2_208_988_800))
    for (index, form) in forms.enumerated() {
        let written = form.string(from: date)
        let parsed = HTTPDate.parse(written)
        check(parsed == date, "form \(index): \(written) parsed as \(String(describing: parsed)), not \(date)")
    }
    return 0
}

@_cdecl("fuzz_retry_after_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzRetryAfter(data.map(UnsafeRawPointer.init), size) }
}
