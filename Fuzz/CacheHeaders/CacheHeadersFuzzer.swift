// libFuzzer harness: the fields a cache reads from the network, as NUL-separated values:
// a response's Cache-Control, Age, Expires, Date and Last-Modified, then a request's
// Cache-Control. Checks that reading them never crashes or traps on arithmetic, that every
// number read is a delta-seconds value within its bounds, and that a stored response's age
// is finite and never negative, so that the Age a cache sends can always be written.
import Foundation
import HTTPTypes
@testable import Trellis

private let requestTime = Date(timeIntervalSince1970: 1_800_000_000)
private let request = try! Request(method: .get, url: URL(string: "https://api.example.com/r")!)

private func checkBounds(_ control: CacheControl, _ text: String) {
    for value in [control.maxAge, control.sharedMaxAge, control.minFresh, control.maxStale].compactMap({ $0 }) {
        check((0...CacheControl.largestDeltaSeconds).contains(value), "\(text) gave \(value)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheHeaders(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let values = UnsafeRawBufferPointer(start: start, count: count)
        .split(separator: 0, maxSplits: 5, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    func value(_ index: Int) -> String? { index < values.count && !values[index].isEmpty ? values[index] : nil }

    var head = HTTPResponse(status: .ok)
    let names: [HTTPField.Name] = [.cacheControl, .age, .expires, .date, .lastModified]
    for (index, name) in names.enumerated() {
        if let text = value(index) { head.headerFields.append(HTTPField(name: name, value: text)) }
    }
    let responseControl = CacheControl(head.headerFields)
    checkBounds(responseControl, value(0) ?? "")
    if let age = CachedResponse.age(of: head) {
        check((0...CacheControl.largestDeltaSeconds).contains(age), "Age \(value(1) ?? "") gave \(age)")
    }
    var requestFields = HTTPFields()
    if let text = value(5) { requestFields.append(HTTPField(name: .cacheControl, value: text)) }
    let requestControl = CacheControl(requestFields)
    checkBounds(requestControl, value(5) ?? "")

    let entry = CachedResponse(
        url: request.urlString, head: head, request: request,
        requestTime: requestTime, responseTime: requestTime.addingTimeInterval(1), bodyLength: 0, bodyDigest: ""
    )
    for later in [0.0, 1, 3_600, 1e9] {
        let now = requestTime.addingTimeInterval(later)
        let age = entry.currentAge(at: now)
        check(age.isFinite && age >= 0, "an age of \(age) from \(values)")
        _ = entry.isUsable(for: requestControl, at: now)
    }
    return 0
}

@_cdecl("fuzz_cache_headers_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzCacheHeaders(data.map(UnsafeRawPointer.init), size) }
}
