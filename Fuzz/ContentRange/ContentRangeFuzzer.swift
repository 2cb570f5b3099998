// libFuzzer harness: a `Content-Range` value, a NUL byte, then a `Range` value. Checks that
// parsing never crashes, that an accepted range is well formed (first ≤ last < total), that
// it reads back the same from its canonical form, and that a 206 is taken as the answer to a
// range only when it starts where the range asked and ends no later.
import Foundation
@testable import Trellis

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContentRange(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let fields = UnsafeRawBufferPointer(start: start, count: count)
        .split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    let range = ContentRange(fields.first)
    if let range {
        check(range.start >= 0 && range.start <= range.end, "\(fields[0]) gave \(range.start)-\(range.end)")
        check(range.total.map { $0 > range.end } ?? true, "\(fields[0]) ends past its total")
        let canonical = "bytes \(range.start)-\(range.end)/\(range.total.map(String.init) ?? "*")"
        check(ContentRange(canonical) == range, "\(canonical) does not read back as \(fields[0]) did")
    }
    guard fields.count > 1, let asked = ByteRangeRequest(fields[1]) else { return 0 }
    check(asked.first >= 0 && (asked.last.map { $0 >= asked.first } ?? true), "\(fields[1]) gave \(asked)")
    if let range {
        let answers = asked.isAnswered(by: range)
        check(answers == (range.start == asked.first && (asked.last.map { range.end <= $0 } ?? true)), "\(fields[0]) for \(fields[1])")
    }
    return 0
}

@_cdecl("fuzz_content_range_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzContentRange(data.map(UnsafeRawPointer.init), size) }
}
