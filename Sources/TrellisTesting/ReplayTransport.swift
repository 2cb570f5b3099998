public import Foundation
public import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
public import Trellis

/// A ``Transport`` that answers from a HAR recording, so that a test replays real traffic
/// with no network.
///
/// ```swift
/// let replay = try ReplayTransport(contentsOf: Bundle.module.url(forResource: "posts", withExtension: "har")!)
/// let blog = BlogService(client: Client(baseURL: URL(string: "https://api.example.com")!, transport: replay))
/// let post = try await blog.post(id: 7)
/// ```
///
/// A request matches a recorded one by method, URL (the query's order ignored) and body;
/// ``Matching`` changes the rules. Both sides are compared redacted (see
/// ``HTTPArchive/Redaction``), so a live secret never has to equal the `<redacted>` of the
/// recording. When several recorded exchanges match, each answers once, in the recorded
/// order, and the last answers again once all have: a recording of polling replays as it
/// was. What happens to a request that matches nothing is the ``Mode``'s choice; by default
/// it fails with a ``ReplayMismatch`` that names the closest recording and how it differs.
public final class ReplayTransport: Transport {
    /// What a request that matches no recording gets.
    public enum Mode: Sendable {
        /// It fails with ``ReplayMismatch``, naming the closest recorded request and how it
        /// differs.
        case strict
        /// It is answered `404 Not Found`, with the mismatch as the body: for code that must
        /// go on.
        case notFound
        /// It goes over `transport` to the network and is recorded; ``archive`` then holds it
        /// beside the replayed ones, for ``write(to:)``. The rest replays.
        case recordingMissing(over: any Transport)
    }

    /// How requests are matched with recordings.
    public struct Matching: Sendable {
        /// Which header fields must match.
        public enum Headers: Sendable {
            /// None: the method, URL and body decide.
            case none
            /// The fields with these names.
            case only(Set<HTTPField.Name>)
            /// Every field the recorded request had, except these (a timestamp, a trace
            /// context).
            case all(except: Set<HTTPField.Name>)
        }

        /// How bodies are compared.
        public enum Body: Sendable {
            /// Byte for byte (after redaction).
            case exact
            /// As JSON values, so key order and spacing do not matter; bodies that are not
            /// JSON are compared byte for byte.
            case json
            /// Not at all.
            case ignored
        }

        /// Which header fields must match; none by default.
        public var headers: Headers
        /// How bodies are compared; byte for byte by default.
        public var body: Body
        /// Query parameters left out of the comparison (a cache buster, a timestamp).
        public var ignoredQueryNames: Set<String>
        /// Whether the scheme, host and port are compared; `false` replays a recording made
        /// against one server for a client of another (a test server on a new port).
        public var comparesOrigin: Bool

        /// Method, URL and body, with no header field, no ignored query parameter.
        public init(headers: Headers = .none, body: Body = .exact, ignoredQueryNames: Set<String> = [], comparesOrigin: Bool = true) {
            self.headers = headers
            self.body = body
            self.ignoredQueryNames = ignoredQueryNames
            self.comparesOrigin = comparesOrigin
        }
    }

    /// How fast recorded bodies are handed over.
    public enum Pacing: Sendable {
        /// At once, in the parts they arrived in (an event stream still comes event by event).
        case immediate
        /// With the recorded waits before the head and between the parts of a streamed body,
        /// divided by `speed`: `.recorded(speed: 10)` replays a 10-second stream in one.
        case recorded(speed: Double)
    }

    private let recorded: [HTTPArchive.Entry]
    private let mode: Mode
    private let matching: Matching
    private let pacing: Pacing
    private let redaction: HTTPArchive.Redaction
    private let missing: HTTPArchiveRecorder
    private let used = NIOLockedValueBox(Set<Int>())

    /// A replay of `archive`'s entries.
    ///
    /// - Parameter redaction: the rules the recording was redacted by, applied to each live
    ///   request before it is compared, and to what ``Mode/recordingMissing(over:)`` records.
    public init(
        archive: HTTPArchive,
        mode: Mode = .strict,
        matching: Matching = Matching(),
        pacing: Pacing = .immediate,
        redaction: HTTPArchive.Redaction = .init()
    ) {
        self.recorded = archive.log.entries
        self.mode = mode
        self.matching = matching
        self.pacing = pacing
        self.redaction = redaction
        self.missing = HTTPArchiveRecorder(redaction: redaction)
    }

    /// A replay of the HAR file at `url`.
    ///
    /// - Throws: the file's read error, or `DecodingError` when it is not HAR.
    public convenience init(
        contentsOf url: URL,
        mode: Mode = .strict,
        matching: Matching = Matching(),
        pacing: Pacing = .immediate,
        redaction: HTTPArchive.Redaction = .init()
    ) throws {
        self.init(archive: try HTTPArchive(contentsOf: url), mode: mode, matching: matching, pacing: pacing, redaction: redaction)
    }

    /// The recording replayed, with what ``Mode/recordingMissing(over:)`` has added.
    public var archive: HTTPArchive {
        HTTPArchive(entries: recorded + missing.archive.log.entries)
    }

    /// Writes ``archive`` to `url`: the recording, completed with what was missing.
    public func write(to url: URL) throws {
        try archive.write(to: url)
    }

    /// How many recorded exchanges have not answered any request yet.
    public var unusedEntryCount: Int {
        recorded.count - used.withLockedValue { $0.count }
    }

    public func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        let (body, whole) = try await Self.read(request.body, upTo: missing.maximumBodySize)
        let live = HTTPArchive.Request(request, body: body, redaction: redaction)
        if let entry = match(live) {
            return try await limits.enforce(for: request) { try await self.answer(from: entry) }
        }
        let mismatch = ReplayMismatch(request: live, closest: closest(to: live))
        switch mode {
        case .strict:
            throw mismatch
        case .notFound:
            return Response(
                head: HTTPResponse(status: .notFound, headerFields: [.contentType: "text/plain; charset=utf-8"]),
                body: ResponseBody(mismatch.description)
            )
        case .recordingMissing(let transport):
            var replayable = request
            // A body read to compare is sent again: a replayable one from its start, a
            // one-shot one from the bytes read, which must be all of it.
            if let sent = request.body, !sent.isReplayable, let body {
                guard whole else {
                    throw TrellisError.invalidRequest(InvalidRequest(.body, "ReplayTransport cannot both compare and send a one-shot body over \(missing.maximumBodySize) bytes: make it replayable (a file, bytes in memory)"))
                }
                replayable.body = RequestBody(body, contentType: sent.defaultContentType)
            }
            return try await missing.record(replayable, bodyDecodedByTransport: transport.decodesContentEncoding) {
                try await transport.send($0, within: limits)
            }
        }
    }

    /// The first unused recorded entry that matches `live`, else the last that matches.
    private func match(_ live: HTTPArchive.Request) -> HTTPArchive.Entry? {
        let candidates = recorded.indices.filter { differences(recorded[$0].request, live).isEmpty }
        if let index = used.withLockedValue({ used -> Int? in
            guard let index = candidates.first(where: { !used.contains($0) }) ?? candidates.last else { return nil }
            used.insert(index)
            return index
        }) {
            return recorded[index]
        }
        // What recording-missing mode has recorded since answers too.
        return missing.archive.log.entries.last { differences($0.request, live).isEmpty }
    }

    private func closest(to live: HTTPArchive.Request) -> (index: Int, request: HTTPArchive.Request, differences: [String])? {
        recorded.indices.map { ($0, recorded[$0].request, differences(recorded[$0].request, live)) }
            .min { weight($0.2, $0.1, live) < weight($1.2, $1.1, live) }
    }

    /// Orders mismatches so that a request differing in its body is closer than one for
    /// another path, and one for another path closer than one with another method.
    private func weight(_ differences: [String], _ recorded: HTTPArchive.Request, _ live: HTTPArchive.Request) -> Int {
        var weight = differences.count
        if recorded.method != live.method { weight += 1000 }
        if Self.path(of: recorded.url) != Self.path(of: live.url) { weight += 100 }
        return weight
    }

    /// How `recorded` differs from `live` under the matching rules, in words; empty when it
    /// matches.
    func differences(_ recorded: HTTPArchive.Request, _ live: HTTPArchive.Request) -> [String] {
        var found: [String] = []
        if recorded.method != live.method {
            found.append("the method: recorded \(recorded.method), sent \(live.method)")
        }
        if matching.comparesOrigin, Self.origin(of: recorded.url) != Self.origin(of: live.url) {
            found.append("the origin: recorded \(Self.origin(of: recorded.url)), sent \(Self.origin(of: live.url))")
        }
        if Self.path(of: recorded.url) != Self.path(of: live.url) {
            found.append("the path: recorded \(Self.path(of: recorded.url)), sent \(Self.path(of: live.url))")
        }
        found += queryDifferences(recorded.queryString, live.queryString)
        found += headerDifferences(recorded.headers, live.headers)
        if let difference = bodyDifference(recorded.postData, live.postData) { found.append(difference) }
        return found
    }

    private func queryDifferences(_ recorded: [HTTPArchive.NameValue], _ live: [HTTPArchive.NameValue]) -> [String] {
        let kept = { (items: [HTTPArchive.NameValue]) in
            Dictionary(grouping: items.filter { !self.matching.ignoredQueryNames.contains($0.name) }, by: \.name).mapValues { $0.map(\.value).sorted() }
        }
        let (before, now) = (kept(recorded), kept(live))
        return Set(before.keys).union(now.keys).sorted().compactMap { name in
            let (old, new) = (before[name] ?? [], now[name] ?? [])
            guard old != new else { return nil }
            let show = { (values: [String]) in values.isEmpty ? "absent" : values.joined(separator: ", ") }
            return "the query item \(name): recorded \(show(old)), sent \(show(new))"
        }
    }

    private func headerDifferences(_ recorded: [HTTPArchive.NameValue], _ live: [HTTPArchive.NameValue]) -> [String] {
        let names: [HTTPField.Name]
        switch matching.headers {
        case .none: return []
        case .only(let only): names = only.sorted { $0.canonicalName < $1.canonicalName }
        case .all(let except):
            var seen = Set<HTTPField.Name>()
            names = recorded.compactMap { HTTPField.Name($0.name) }.filter { !except.contains($0) && seen.insert($0).inserted }
        }
        let values = { (fields: [HTTPArchive.NameValue], name: HTTPField.Name) in
            fields.filter { HTTPField.Name($0.name) == name }.map(\.value)
        }
        return names.compactMap { name in
            let (old, new) = (values(recorded, name), values(live, name))
            guard old != new else { return nil }
            let show = { (values: [String]) in values.isEmpty ? "absent" : values.joined(separator: ", ") }
            return "the header field \(name): recorded \(show(old)), sent \(show(new))"
        }
    }

    private func bodyDifference(_ recorded: HTTPArchive.PostData?, _ live: HTTPArchive.PostData?) -> String? {
        let bytes = { (data: HTTPArchive.PostData?) -> Data in
            guard let data else { return Data() }
            return (data.encoding == "base64" ? Data(base64Encoded: data.text) : nil) ?? Data(data.text.utf8)
        }
        let (old, new) = (bytes(recorded), bytes(live))
        switch matching.body {
        case .ignored: return nil
        case .exact: if old == new { return nil }
        case .json: if old == new || (Self.canonicalJSON(old).map { $0 == Self.canonicalJSON(new) } ?? false) { return nil }
        }
        return "the body: recorded \(Self.excerpt(old)), sent \(Self.excerpt(new))"
    }

    private static func canonicalJSON(_ data: Data) -> Data? {
        guard let value = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else { return nil }
        return try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys])
    }

    private static func excerpt(_ data: Data) -> String {
        if data.isEmpty { return "none" }
        guard let text = String(data: data, encoding: .utf8) else { return "\(data.count) bytes of binary data" }
        return text.count > 80 ? "\"\(text.prefix(80))…\" (\(data.count) bytes)" : "\"\(text)\""
    }

    private static func origin(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return "" }
        let rest = url[schemeEnd.upperBound...]
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        return String(url[..<end]).lowercased()
    }

    private static func path(of url: String) -> String {
        let withoutOrigin = url.dropFirst(origin(of: url).count)
        let path = withoutOrigin.prefix { $0 != "?" && $0 != "#" }
        return path.isEmpty ? "/" : String(path)
    }

    /// A request's body as far as a recording keeps one (`limit` bytes: a recorder cuts a
    /// longer body at the same length), and whether that was all of it; `nil` for none.
    private static func read(_ body: RequestBody?, upTo limit: Int) async throws -> (Data?, whole: Bool) {
        guard let body else { return (nil, true) }
        if let bytes = body.bytes { return (Data(buffer: bytes.getSlice(at: bytes.readerIndex, length: min(limit, bytes.readableBytes))!), bytes.readableBytes <= limit) }
        var data = Data()
        var chunks = body.makeChunkIterator()
        while let chunk = try await chunks.next() {
            data.append(contentsOf: chunk.readableBytesView.prefix(limit - data.count))
            if data.count >= limit { return (data, try await chunks.next() == nil) }
        }
        return (data, true)
    }

    private func answer(from entry: HTTPArchive.Entry) async throws -> Response<ResponseBody> {
        let recorded = entry.response
        // Status 0 is an exchange that failed before its answer (a timeout, a refused
        // connection): it fails again. A status no HTTP response has is refused the same way.
        guard (100...999).contains(recorded.status) else {
            let reason = recorded.status == 0 ? "the recorded exchange failed" : "the recorded status \(recorded.status) is not an HTTP status"
            throw TrellisError.connectionFailed(ConnectionFailure(
                host: URL(string: entry.request.url)?.host ?? entry.request.url,
                reason: reason + (entry.comment.map { ": \($0)" } ?? "") + " (ReplayTransport)"
            ))
        }
        var fields = HTTPFields()
        // What the transport framed the body with is not a header a replay can keep.
        for header in recorded.headers where header.name.lowercased() != "transfer-encoding" {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        let content = recorded.content
        guard let bytes = content.bytes ?? (content.text == nil ? Data() : nil) else {
            // Served as empty, a body that does not decode would pass for the server's answer.
            throw TrellisError.connectionFailed(ConnectionFailure(
                host: URL(string: entry.request.url)?.host ?? entry.request.url,
                reason: "the recorded response to \(entry.request.method) \(entry.request.url) (started \(entry.startedDateTime)) "
                    + "says its body is base64, and its text is not base64 (ReplayTransport)"
            ))
        }
        // A redacted or cut body is not the length the server announced.
        if fields[.contentLength] != nil { fields[.contentLength] = String(bytes.count) }
        let head = HTTPResponse(status: HTTPResponse.Status(code: recorded.status, reasonPhrase: recorded.statusText), headerFields: fields)
        try await Self.wait(milliseconds: entry.timings.wait, pacing)
        guard let chunks = recorded.content.chunks, chunks.count > 1 else {
            return Response(head: head, body: ResponseBody(bytes))
        }
        return Response(head: head, body: ResponseBody(stream: Self.paced(bytes, chunks, pacing), expectedLength: nil))
    }

    /// Waits a recorded time under `pacing`: none when immediate; an hour at most, whatever
    /// a file says.
    private static func wait(milliseconds: Double, _ pacing: Pacing) async throws {
        guard case .recorded(let speed) = pacing, speed > 0, milliseconds.isFinite, milliseconds > 0 else { return }
        try await Task.sleep(for: .milliseconds(min(milliseconds / speed, 3_600_000)))
    }

    /// `bytes` cut as `chunks` arrived, each after its recorded wait under `pacing`; what the
    /// recording cut off is left out.
    private static func paced(_ bytes: Data, _ chunks: [HTTPArchive.Chunk], _ pacing: Pacing) -> AsyncThrowingStream<ByteBuffer, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var offset = 0
                var previous = 0.0
                for chunk in chunks where offset < bytes.count {
                    do {
                        try await wait(milliseconds: chunk.time - previous, pacing)
                    } catch {
                        continuation.finish(throwing: error)
                        return
                    }
                    previous = max(previous, chunk.time)
                    let end = offset + min(bytes.count - offset, max(0, chunk.size))
                    continuation.yield(ByteBuffer(data: bytes[offset..<end]))
                    offset = end
                }
                if offset < bytes.count { continuation.yield(ByteBuffer(data: bytes[offset...])) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// A request that no recording matched, as ``ReplayTransport`` reports it in strict mode:
/// the request, and the closest recorded one with how it differs.
public struct ReplayMismatch: Error, CustomStringConvertible, Sendable {
    /// The request that matched nothing, redacted.
    public let request: HTTPArchive.Request
    /// The closest recorded request: its index among the archive's entries, the request, and
    /// how it differs from ``request``, in words; `nil` when the archive is empty.
    public let closest: (index: Int, request: HTTPArchive.Request, differences: [String])?

    public var description: String {
        var text = "ReplayTransport: no recorded exchange matches \(request.method) \(request.url)"
        guard let closest else { return text + "; the recording is empty" }
        text += ". The closest is entry \(closest.index), \(closest.request.method) \(closest.request.url), which differs in "
        text += closest.differences.joined(separator: "; ")
        return text
    }
}
