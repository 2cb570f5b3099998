public import Foundation

/// A recording of HTTP traffic in HAR 1.2, the HTTP Archive format that browsers' developer
/// tools, Charles and Proxyman open and write.
///
/// ``HTTPArchiveRecorder`` makes one from a client's traffic, with credentials redacted;
/// `TrellisTesting` replays one (`ReplayTransport`). The types follow the format's
/// specification field by field, so a recording made elsewhere decodes too:
///
/// ```swift
/// let archive = try HTTPArchive(contentsOf: URL(fileURLWithPath: "Recordings/posts.har"))
/// for entry in archive.log.entries {
///     print(entry.request.method, entry.request.url, entry.response.status)
/// }
/// ```
///
/// Trellis adds one field the format allows for extensions (its name starts with `_`):
/// ``Content/chunks``, the arrival of a streamed body's parts, so that an event stream can be
/// replayed as it came.
public struct HTTPArchive: Codable, Sendable, Equatable {
    /// The recording.
    public var log: Log

    /// An archive of `entries`, written by `creator`.
    public init(entries: [Entry] = [], creator: Creator = .trellis, comment: String? = nil) {
        self.log = Log(version: "1.2", creator: creator, entries: entries, comment: comment)
    }

    /// The archive in the HAR file at `url`.
    ///
    /// A file is read only within bounds, since a recording may come from anywhere: one larger
    /// than ``maximumFileSize``, or whose JSON nests deeper than ``maximumDepth``, is refused
    /// before it is decoded.
    ///
    /// - Throws: the file's read error, or `DecodingError` naming the field that does not
    ///   match the format, or the bound the file goes past.
    public init(contentsOf url: URL) throws {
        let size = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int ?? 0
        guard size <= Self.maximumFileSize else {
            throw Self.refusal("the HAR file \(url.path) is \(size) bytes, over the \(Self.maximumFileSize) a recording may be")
        }
        let data = try Data(contentsOf: url)
        if let depth = Self.nesting(of: data, over: Self.maximumDepth) {
            throw Self.refusal("the HAR file \(url.path) nests its JSON \(depth) levels deep, over the \(Self.maximumDepth) HAR needs")
        }
        self = try JSONDecoder().decode(HTTPArchive.self, from: data)
    }

    /// The largest HAR file ``init(contentsOf:)`` reads: 1 GiB.
    public static let maximumFileSize = 1 << 30

    /// The deepest nesting of JSON objects and arrays ``init(contentsOf:)`` decodes. HAR's own
    /// structure is under 10 levels deep; bodies are strings, whatever they hold.
    public static let maximumDepth = 64

    /// The depth `data`'s JSON reaches once it is past `limit`, or `nil` when it stays within:
    /// a count of brackets outside strings, which takes time in proportion to the file, where a
    /// decoder given 200,000 levels takes minutes.
    private static func nesting(of data: Data, over limit: Int) -> Int? {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in data {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth > limit { return depth }
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default: break
            }
        }
        return nil
    }

    private static func refusal(_ description: String) -> DecodingError {
        DecodingError.dataCorrupted(DecodingError.Context(codingPath: [], debugDescription: description))
    }

    /// The archive as HAR's JSON, indented and with sorted keys, so that a recording
    /// committed to a repository changes line by line.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Writes the archive to `url` as a HAR file, replacing what was there at once (never a
    /// half-written file), readable by its owner alone (mode 0600): even redacted, a session's
    /// exchanges are close to credentials, as curl treats its cookie jar.
    ///
    /// - Throws: ``TrellisError/fileFailed(_:)`` naming the file when it cannot be written.
    public func write(to url: URL) throws {
        try FileIO.replaceAtomically(url.path, with: encoded())
    }

    /// The root of a HAR file.
    public struct Log: Codable, Sendable, Equatable {
        /// The format's version: `1.2`.
        public var version: String
        /// The program that wrote the archive.
        public var creator: Creator
        /// The exchanges, in the order they started.
        public var entries: [Entry]
        /// A note on the whole recording (how many entries were left out, say).
        public var comment: String?
    }

    /// The program that wrote an archive.
    public struct Creator: Codable, Sendable, Equatable {
        /// Its name.
        public var name: String
        /// Its version.
        public var version: String

        /// A creator named `name`, at `version`.
        public init(name: String, version: String) {
            self.name = name
            self.version = version
        }

        /// Trellis.
        public static let trellis = Creator(name: "Trellis", version: "1")
    }
}
