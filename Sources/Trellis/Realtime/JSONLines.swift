import Foundation
import HTTPTypes
import NIOCore

/// A body of newline-delimited JSON values (JSON Lines, `application/x-ndjson`,
/// `application/jsonl`) or of JSON text sequences (RFC 7464, `application/json-seq`) as an
/// asynchronous sequence of decoded values.
///
/// Model servers (Ollama's `/api/generate`), Docker's `/events`, Kubernetes watches and export
/// endpoints answer this way: one value per line, for as long as the server likes. Each value
/// is yielded as soon as its line is complete, and read from the network as it is consumed, so
/// a slow consumer holds the connection back instead of letting lines pile up in memory.
///
/// - The request is sent when iteration starts, through the whole pipeline: access tokens,
///   retries before the response begins, redirects, and every other stage.
/// - A line longer than ``Settings/maximumLineLength`` (1 MiB by default) ends the stream with
///   ``TrellisError/responseTooLarge(_:)``; a stream silent for the client's idle timeout ends
///   with ``TrellisError/timedOut(_:)``.
/// - A line that is not a valid value ends the stream with ``TrellisError/decodingFailed(_:)``
///   naming its number and showing its beginning, or is passed over when
///   ``Settings/skipsMalformedLines`` is set.
/// - A last line without a newline counts; blank lines are passed over; RFC 7464's record
///   separator (`0x1E`) before a value is dropped.
/// - Ending the iteration early (a `break`, or cancelling the task) closes the connection.
///
/// ```swift
/// for try await token in client.jsonLines(for: request, as: Token.self) {
///     print(token.response, terminator: "")
/// }
/// ```
public struct JSONLines<Element: Decodable & Sendable>: AsyncSequence, Sendable {
    /// The former name of ``Settings``: every group of settings is named `…Settings`.
    @available(*, deprecated, renamed: "Settings")
    public typealias Options = Settings

    /// How a stream of JSON values is read.
    public struct Settings: Sendable {
        /// The longest line accepted, in bytes; 1 MiB by default.
        public var maximumLineLength: Int
        /// Whether a line that is not a valid value is passed over instead of ending the stream.
        public var skipsMalformedLines: Bool

        /// Settings with a line limit of `maximumLineLength` bytes, ending at a malformed line
        /// unless `skipsMalformedLines`.
        public init(maximumLineLength: Int = 1 << 20, skipsMalformedLines: Bool = false) {
            self.maximumLineLength = maximumLineLength
            self.skipsMalformedLines = skipsMalformedLines
        }
    }

    let client: Client
    let request: Request
    let settings: Settings

    public func makeAsyncIterator() -> Iterator {
        Iterator(stream: self)
    }

    /// Reads lines from the response as values are asked for.
    public struct Iterator: AsyncIteratorProtocol {
        let stream: JSONLines
        private var lines: LineSplitter
        private var body: ChunkIterator?
        private var status: HTTPResponse.Status = .ok
        private var lineNumber = 0
        private var connected = false
        private var bodyEnded = false
        private var finished = false

        init(stream: JSONLines) {
            self.stream = stream
            self.lines = LineSplitter(maximumLineLength: stream.settings.maximumLineLength)
        }

        public mutating func next() async throws -> Element? {
            guard !finished else { return nil }
            do {
                while true {
                    if let line = try lines.nextLine(atEnd: bodyEnded) {
                        lineNumber += 1
                        guard let value = try decode(line) else { continue }
                        return value
                    }
                    if bodyEnded {
                        finished = true
                        return nil
                    }
                    if !connected {
                        try await connect()
                        continue
                    }
                    if let chunk = try await body?.next() {
                        try lines.append(chunk)
                    } else {
                        body = nil
                        bodyEnded = true
                    }
                }
            } catch {
                // The stream ends at its first failure; dropping the body closes the connection.
                finished = true
                body = nil
                throw error
            }
        }

        /// The value of `line`, or `nil` for a blank line or a malformed one the settings skip.
        private func decode(_ line: ArraySlice<UInt8>) throws -> Element? {
            var text = line
            if text.first == 0x1E { text = text.dropFirst() }  // RFC 7464's record separator
            guard text.contains(where: { !Self.isJSONWhitespace($0) }) else { return nil }
            let data = Data(text)
            do {
                return try stream.client.decoder.decode(Element.self, from: data)
            } catch {
                if stream.settings.skipsMalformedLines { return nil }
                var failure = DecodingFailure(type: Element.self, error: error, status: status, body: data)
                failure.line = lineNumber
                throw TrellisError.decodingFailed(failure)
            }
        }

        private static func isJSONWhitespace(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
        }

        private mutating func connect() async throws {
            var request = stream.request
            if request.headerFields[.accept] == nil {
                request.headerFields[.accept] = "application/x-ndjson, application/jsonl, application/json-seq, application/json;q=0.9"
            }
            connected = true
            let response = try await stream.client.send(request)
            guard (200...299).contains(response.status.code) else {
                throw await stream.client.statusFailure(response, for: request)
            }
            status = response.status
            body = response.body.makeAsyncIterator()
        }
    }
}

/// Cuts bytes into lines at `\n` (a `\r` before it is dropped). It is given more bytes only when
/// it has no whole line left, so it holds the line under way and one chunk: a line longer than
/// `maximumLineLength` fails as soon as it is known to be.
struct LineSplitter {
    let maximumLineLength: Int
    private var buffer: [UInt8] = []
    /// Where the next line starts in `buffer`.
    private var start = 0
    /// How far `buffer` has been searched for a newline, so that no byte is searched twice
    /// while a long line arrives in small chunks.
    private var searched = 0

    init(maximumLineLength: Int) {
        self.maximumLineLength = maximumLineLength
    }

    /// Adds bytes read.
    ///
    /// - Throws: ``TrellisError/responseTooLarge(_:)`` when the line under way, without a
    ///   newline yet, is already longer than the limit.
    mutating func append(_ chunk: ByteBuffer) throws {
        if start > 0, start >= buffer.count / 2 {
            // The lines handed out go, so that the buffer holds the line under way alone.
            buffer.removeFirst(start)
            searched -= start
            start = 0
        }
        buffer.append(contentsOf: chunk.readableBytesView)
        guard buffer[searched...].firstIndex(of: 0x0A) == nil else { return }
        searched = buffer.count
        if buffer.count - start > maximumLineLength { throw tooLong }
    }

    /// The next whole line, without its newline; at the end of the body, what is left counts as
    /// the last line.
    ///
    /// - Throws: ``TrellisError/responseTooLarge(_:)`` for a line longer than the limit.
    mutating func nextLine(atEnd: Bool) throws -> ArraySlice<UInt8>? {
        var line: ArraySlice<UInt8>
        if let newline = buffer[searched...].firstIndex(of: 0x0A) {
            line = buffer[start..<newline]
            start = newline + 1
            searched = start
        } else {
            searched = buffer.count
            guard atEnd, start < buffer.count else { return nil }
            line = buffer[start...]
            start = buffer.count
        }
        if line.last == 0x0D { line = line.dropLast() }
        guard line.count <= maximumLineLength else { throw tooLong }
        return line
    }

    private var tooLong: TrellisError {
        .responseTooLarge(ResponseTooLarge(limit: maximumLineLength, announcedLength: nil, subject: "a line of the JSON stream"))
    }
}

extension Client {
    /// The values of a JSON Lines (or RFC 7464 JSON text sequence) response to `request`, each
    /// decoded as `type` with the client's decoder as soon as its line is complete (see
    /// ``JSONLines``). Nothing is sent until the sequence is iterated.
    public func jsonLines<Value: Decodable & Sendable>(
        for request: Request,
        as type: Value.Type,
        settings: JSONLines<Value>.Settings = .init()
    ) -> JSONLines<Value> {
        JSONLines(client: self, request: request, settings: settings)
    }

    /// ``jsonLines(for:as:settings:)`` under its former label.
    @available(*, deprecated, renamed: "jsonLines(for:as:settings:)")
    public func jsonLines<Value: Decodable & Sendable>(
        for request: Request,
        as type: Value.Type,
        options: JSONLines<Value>.Settings
    ) -> JSONLines<Value> {
        jsonLines(for: request, as: type, settings: options)
    }
}
