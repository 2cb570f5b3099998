// libFuzzer harness: query item names and values, separated by NUL bytes, added with
// `_RequestBuilder.query` (odd positions) and `queryItems` (the rest). Checks that the URL is
// valid, keeps its host and path, and that a standard parser reads back exactly the items put
// in, in order.
import Foundation
import Trellis

private let client = Client(baseURL: URL(string: "http://example.com/base")!)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQueryEncoder(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let fields = UnsafeRawBufferPointer(start: start, count: count)
        .split(separator: 0, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    var pairs: [(String, String)] = []
    var index = 0
    while index + 1 < fields.count {
        pairs.append((fields[index], fields[index + 1]))
        index += 2
    }
    var builder = _RequestBuilder(method: .get, path: "/items")
    for (position, pair) in pairs.enumerated() {
        if position % 2 == 0 {
            builder.query(pair.0, pair.1)
        } else {
            builder.queryItems([URLQueryItem(name: pair.0, value: pair.1)])
        }
    }
    let request: Request
    do {
        request = try builder.makeRequest(for: client)
    } catch {
        fatalError("a query made the request invalid: \(error)")
    }
    guard let components = URLComponents(string: request.urlString) else {
        fatalError("\(request.urlString) is not a URL")
    }
    check(components.host == "example.com" && components.percentEncodedPath == "/base/items", "\(request.urlString) moved")
    let items = (components.percentEncodedQueryItems ?? []).map { item in
        (item.name.removingPercentEncoding ?? "<undecodable>", item.value?.removingPercentEncoding ?? "<undecodable>")
    }
    check(items.count == pairs.count, "\(pairs.count) items sent, \(items.count) read back from \(request.urlString)")
    for (sent, read) in zip(pairs, items) {
        check(sent == read, "\(sent) read back as \(read) from \(request.urlString)")
    }
    return 0
}

@_cdecl("fuzz_query_encoder_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzQueryEncoder(data.map(UnsafeRawPointer.init), size) }
}
