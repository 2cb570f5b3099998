// libFuzzer harness: a path template as `@GET` sees it, then values for its placeholders, all
// separated by NUL bytes. Checks that parsing never crashes, that an accepted template is
// rebuilt exactly from its parts, and that expanding it with any values gives a URL whose
// placeholder segments decode back to those values and whose other segments are untouched;
// only an empty value or a dot segment (`.`, `..`) may be refused.
import Foundation
import Trellis

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURLTemplate(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let fields = UnsafeRawBufferPointer(start: start, count: count)
        .split(separator: 0, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    guard let text = fields.first, case .success(let template) = PathTemplate.parse(text) else { return 0 }

    var rebuilt = ""
    for part in template.parts {
        switch part {
        case .literal(let literal): rebuilt += literal
        case .placeholder(let name, let defaultValue): rebuilt += "{\(name)\(defaultValue.map { "=\($0)" } ?? "")}"
        }
    }
    if text.contains("?") { rebuilt += "?" + template.query }
    let expected = text.hasPrefix("/") ? text : "/" + text
    check(rebuilt == expected, "template \(text.debugDescription) rebuilt as \(rebuilt.debugDescription)")

    var values = fields.dropFirst().makeIterator()
    var path = ""
    var expansions: [(segment: String, value: String)] = []
    for part in template.parts {
        switch part {
        case .literal(let literal):
            path += literal
        case .placeholder(let name, let defaultValue):
            let value = values.next() ?? defaultValue ?? "x"
            do {
                let segment = try _RequestBuilder.pathSegment(value, name: name)
                check(!segment.contains("/") && !segment.contains("?") && !segment.contains("#"), "segment \(segment) of \(value.debugDescription)")
                check(segment != "." && segment != "..", "dot segment from \(value.debugDescription)")
                check(segment.removingPercentEncoding == value, "segment \(segment) decodes to something else than \(value.debugDescription)")
                expansions.append((segment, value))
                path += segment
            } catch TrellisError.invalidRequest(let problem) {
                // Only what would change the path's structure is refused: nothing, or a dot
                // segment, which a URL normaliser would resolve.
                check(["", ".", ".."].contains(value) && problem.part == .pathParameter(name), "\(value.debugDescription) refused: \(problem)")
                return 0
            } catch {
                fatalError("unexpected error \(error)")
            }
        }
    }
    let query = text.contains("?") ? "?" + template.query : ""
    guard let url = URL(string: "http://example.com" + path + query) else {
        fatalError("expanded path \(path + query) is not a URL")
    }
    check(url.host == "example.com", "the expansion changed the host: \(url)")
    return 0
}

@_cdecl("fuzz_url_template_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzURLTemplate(data.map(UnsafeRawPointer.init), size) }
}
