// libFuzzer harness: multipart parts as NUL-separated fields (name, file name, media type,
// content, repeated; an empty file name makes a text field). Checks that the encoded body has
// exactly the announced length, and that multipart-kit's parser finds every part with its
// name, file name, media type and bytes, whatever characters they hold.
import Dispatch
import Foundation
import MultipartKit
import Trellis

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMultipartEncoder(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let fields = UnsafeRawBufferPointer(start: start, count: count)
        .split(separator: 0, omittingEmptySubsequences: false)
        .map { Data($0) }
    var form = MultipartForm()
    var expected: [(name: String, fileName: String?, type: String?, content: Data)] = []
    var index = 0
    while index + 3 < fields.count {
        let name = String(decoding: fields[index], as: UTF8.self)
        let fileName = String(decoding: fields[index + 1], as: UTF8.self)
        let type = String(decoding: fields[index + 2], as: UTF8.self)
        let content = fields[index + 3]
        if fileName.isEmpty {
            let text = String(decoding: content, as: UTF8.self)
            form.addField(name, text)
            expected.append((name, nil, nil, Data(text.utf8)))
        } else {
            let mimeType = type.isEmpty ? nil : type
            form.addData(name, content, fileName: fileName, mimeType: mimeType)
            // Written out independently of the encoder: no control characters, no space or tab around.
            let sentType = mimeType.map { type in
                String(type.unicodeScalars.filter { $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) })
                    .trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            } ?? MIMEType.forFileName(fileName)
            expected.append((name, fileName, sentType, content))
        }
        index += 4
    }

    let body = encode(form)
    check(Int64(body.count) == form.length, "encoded \(body.count) bytes, announced \(form.length)")

    // A form without parts is the closing delimiter alone, as browsers send an empty form;
    // RFC 2046 parsers (multipart-kit among them) want at least one part, so there is
    // nothing to read back.
    guard !expected.isEmpty else { return 0 }
    var parsed: [(headers: [String: String], content: Data)] = []
    var headers: [String: String] = [:]
    var content = Data()
    let parser = MultipartParser(boundary: form.boundary)
    parser.onHeader = { name, value in headers[name.lowercased()] = value }
    parser.onBody = { buffer in content.append(contentsOf: buffer.readableBytesView) }
    parser.onPartComplete = {
        parsed.append((headers, content))
        headers = [:]
        content = Data()
    }
    do {
        try parser.execute([UInt8](body))
    } catch {
        fatalError("multipart-kit cannot parse the body: \(error)")
    }
    check(parsed.count == expected.count, "\(expected.count) parts sent, \(parsed.count) parsed")
    for (sent, read) in zip(expected, parsed) {
        var disposition = "form-data; name=\"\(escape(sent.name))\""
        if let fileName = sent.fileName { disposition += "; filename=\"\(escape(fileName))\"" }
        // multipart-kit trims the spaces around a header value, as RFC 9110 says readers may.
        let trimmed = { (text: String) in text.trimmingCharacters(in: CharacterSet(charactersIn: " \t")) }
        check(read.headers["content-disposition"] == trimmed(disposition), "disposition \(String(describing: read.headers["content-disposition"])) for \(disposition)")
        check(read.headers["content-type"] == sent.type, "type \(String(describing: read.headers["content-type"])) for \(String(describing: sent.type))")
        check(read.content == sent.content, "content differs for part \(sent.name.debugDescription)")
    }
    return 0
}

/// The name escaping the WHATWG HTML standard prescribes, written out independently.
/// Scalar by scalar: a quote followed by a combining mark is one `Character`, and still a quote.
private func escape(_ text: String) -> String {
    text.unicodeScalars.map { scalar in
        switch scalar {
        case "\"": "%22"
        case "\r": "%0D"
        case "\n": "%0A"
        default: String(scalar)
        }
    }.joined()
}

/// The body, from the form's async encoder, on a thread of its own.
private func encode(_ form: MultipartForm) -> Data {
    let done = DispatchSemaphore(value: 0)
    let result = Box()
    Task {
        result.data = try? await form.encoded()
        done.signal()
    }
    done.wait()
    guard let data = result.data else { fatalError("a form of data parts failed to encode") }
    return data
}

private final class Box: @unchecked Sendable {
    var data: Data?
}

@_cdecl("fuzz_multipart_encoder_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzMultipartEncoder(data.map(UnsafeRawPointer.init), size) }
}
