// libFuzzer harness: a path template as `@GET` sees it, then values for its placeholders, all
// separated by NUL bytes. Checks that parsing never crashes, that an accepted template is
// rebuilt exactly from its parts, and that expanding it with any values gives a URL whose
// placeholder segments decode back to those values and whose other segments are untouched.
import Foundation
import Trellis

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURLTemplate(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
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
    precondition(rebuilt == expected, "template \(text.debugDescription) rebuilt as \(rebuilt.debugDescription)")

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
                let segment = try RequestBuilder.pathSegment(value, name: name)
                precondition(!segment.contains("/") && !segment.contains("?") && !segment.contains("#"), "segment \(segment) of \(value.debugDescription)")
                precondition(segment != "." && segment != "..", "dot segment from \(value.debugDescription)")
                precondition(segment.removingPercentEncoding == value, "segment \(segment) decodes to something else than \(value.debugDescription)")
                expansions.append((segment, value))
                path += segment
            } catch TrellisError.invalidRequest(let problem) {
                precondition(value.isEmpty && problem.part == .pathParameter(name), "\(value.debugDescription) refused: \(problem)")
                return 0
            } catch {
                preconditionFailure("unexpected error \(error)")
            }
        }
    }
    let query = text.contains("?") ? "?" + template.query : ""
    guard let url = URL(string: "http://example.com" + path + query) else {
        preconditionFailure("expanded path \(path + query) is not a URL")
    }
    precondition(url.host == "example.com", "the expansion changed the host: \(url)")
    return 0
}
