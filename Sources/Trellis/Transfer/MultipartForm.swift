public import Foundation
import NIOCore

/// A `multipart/form-data` body (RFC 7578): text fields and files, streamed part by part.
///
/// Files are read from disk a chunk at a time as the request is sent, never gathered into
/// memory or copied to a temporary file, and the total length is worked out in advance so the
/// request carries `Content-Length`. The form can be sent again (a retry, a token refresh):
/// each send reads the files afresh.
///
/// ```swift
/// var form = MultipartForm()
/// form.addField("title", "Holiday")
/// try form.addFile("photo", fileAt: photoURL)                  // image/jpeg from ".jpg"
/// form.addData("notes", notes, fileName: "notes.txt")
/// let response = try await client.data(for: request.withBody(form.makeBody()))
/// ```
///
/// Names and file names are written as browsers write them (WHATWG HTML): UTF-8, with `"`,
/// CR and LF percent-encoded, so a name can hold any character.
public struct MultipartForm: Sendable {
    /// One part of a form.
    public struct Part: Sendable {
        enum Content: Sendable {
            case bytes(ByteBuffer)
            case file(path: String, length: Int64)
        }

        /// The form field's name.
        public let name: String
        /// The file name, for a file part.
        public let fileName: String?
        /// The part's media type; `nil` for a plain text field.
        public let contentType: String?
        let content: Content

        /// The length of the part's content in bytes.
        public var contentLength: Int64 {
            switch content {
            case .bytes(let buffer): Int64(buffer.readableBytes)
            case .file(_, let length): length
            }
        }

        /// The part's boundary line and headers, as sent.
        func head(boundary: String) -> ByteBuffer {
            var text = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(MultipartForm.escape(name))\""
            if let fileName {
                text += "; filename=\"\(MultipartForm.escape(fileName))\""
            }
            text += "\r\n"
            if let contentType {
                text += "Content-Type: \(MultipartForm.headerSafe(contentType))\r\n"
            }
            text += "\r\n"
            return ByteBuffer(string: text)
        }
    }

    /// The delimiter between parts: random, so that it cannot be predicted from (or appear by
    /// chance in) the files sent.
    public let boundary: String
    /// The parts, in the order they are sent.
    public private(set) var parts: [Part] = []

    /// An empty form with a fresh random boundary.
    public init() {
        self.boundary = MultipartForm.randomBoundary()
    }

    /// An empty form with the given boundary: 1 to 70 characters from RFC 2046's set. Use it
    /// for reproducible bodies in tests; otherwise let the form choose.
    public init(boundary: String) throws {
        let allowed = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=?")
        guard (1...70).contains(boundary.count), boundary.allSatisfy({ allowed.contains($0) }) else {
            throw TrellisError.invalidRequest(InvalidRequest(.body, "\"\(boundary)\" is not a valid multipart boundary: 1 to 70 letters, digits or '()+_,-./:=?"))
        }
        self.boundary = boundary
    }

    /// The `Content-Type` of the body, with its boundary.
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// Adds a text field.
    public mutating func addField(_ name: String, _ value: String) {
        parts.append(Part(name: name, fileName: nil, contentType: nil, content: .bytes(ByteBuffer(string: value))))
    }

    /// Adds a file held in memory.
    ///
    /// - Parameters:
    ///   - name: the form field's name.
    ///   - data: the file's bytes.
    ///   - fileName: the name the server sees; a part without one is a plain field.
    ///   - mimeType: defaults to the type of `fileName`'s extension.
    public mutating func addData(_ name: String, _ data: Data, fileName: String? = nil, mimeType: String? = nil) {
        let type = mimeType ?? fileName.map(MIMEType.forFileName) ?? MIMEType.octetStream
        parts.append(Part(name: name, fileName: fileName, contentType: type, content: .bytes(ByteBuffer(data: data))))
    }

    /// Adds a file streamed from disk when the form is sent.
    ///
    /// - Parameters:
    ///   - name: the form field's name.
    ///   - url: the file to send.
    ///   - fileName: defaults to the file's own name.
    ///   - mimeType: defaults to the type of the file's extension.
    /// - Throws: ``TrellisError/fileFailed(_:)`` when there is no readable regular file at `url`.
    public mutating func addFile(_ name: String, fileAt url: URL, fileName: String? = nil, mimeType: String? = nil) throws {
        let path = url.path
        let length = try FileIO.sizeOfFile(path)
        let sentName = fileName ?? url.lastPathComponent
        let type = mimeType ?? MIMEType.forFileName(path)
        parts.append(Part(name: name, fileName: sentName, contentType: type, content: .file(path: path, length: length)))
    }

    /// The body's exact length in bytes.
    public var length: Int64 {
        let closing = Int64(boundary.utf8.count + 6)  // "--" boundary "--\r\n"
        return parts.reduce(closing) { total, part in
            total + Int64(part.head(boundary: boundary).readableBytes) + part.contentLength + 2  // content "\r\n"
        }
    }

    /// The form as a request body, with its `Content-Type` and length.
    public func makeBody() -> RequestBody {
        let form = self
        return RequestBody(storage: .replayableStream { form.makeChunkIterator() }, length: length, contentType: contentType)
    }

    /// The encoded form, chunk by chunk: each part's head, its content (files a chunk at a
    /// time), and the closing delimiter.
    func makeChunkIterator() -> ChunkIterator {
        var index = 0
        var fileChunks: ChunkIterator?
        var finished = false
        return ChunkIterator {
            while true {
                if var current = fileChunks {
                    let chunk = try await current.next()
                    fileChunks = current
                    if let chunk { return chunk }
                    fileChunks = nil
                    return ByteBuffer(string: "\r\n")
                }
                guard index < parts.count else {
                    if finished { return nil }
                    finished = true
                    return ByteBuffer(string: "--\(boundary)--\r\n")
                }
                let part = parts[index]
                index += 1
                var head = part.head(boundary: boundary)
                switch part.content {
                case .bytes(var bytes):
                    head.writeBuffer(&bytes)
                    head.writeString("\r\n")
                    return head
                case .file(let path, let length):
                    fileChunks = FileIO.chunks(of: path, in: 0..<length)
                    return head
                }
            }
        }
    }

    /// The body in memory, for tests and small forms.
    public func encoded() async throws -> Data {
        var iterator = makeChunkIterator()
        var data = Data()
        while let chunk = try await iterator.next() { data.append(contentsOf: chunk.readableBytesView) }
        return data
    }

    /// A name or file name inside a quoted header parameter, as WHATWG HTML encodes it.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "\"": escaped += "%22"
            case "\r": escaped += "%0D"
            case "\n": escaped += "%0A"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// A media type as a header value: control characters (line breaks among them, so a
    /// caller's value cannot add header lines) removed, and no space or tab around it.
    static func headerSafe(_ text: String) -> String {
        let kept = String(text.unicodeScalars.filter { $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) })
        return kept.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
    }

    private static func randomBoundary() -> String {
        let characters = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        var generator = SystemRandomNumberGenerator()
        return "trellis-" + String((0..<32).map { _ in characters[Int.random(in: 0..<characters.count, using: &generator)] })
    }
}

/// How a file part of a `@FileUpload` endpoint is described to the server: Snowdrop's
/// `PayloadDescription`.
public struct PayloadDescription: Sendable, Equatable {
    /// The form field's name.
    public var name: String
    /// The file name the server sees.
    public var fileName: String
    /// The media type; from the file name's extension when `nil`.
    public var mimeType: String?

    /// The form field `name`, the file name `fileName` the server is told, and its media type
    /// (from the file name's extension when `nil`).
    public init(name: String, fileName: String, mimeType: String? = nil) {
        self.name = name
        self.fileName = fileName
        self.mimeType = mimeType
    }
}
