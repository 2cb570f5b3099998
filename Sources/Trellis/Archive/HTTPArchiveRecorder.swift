public import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore

/// Records exchanges as HAR entries, redacted, for ``HTTPArchive``.
///
/// ``HTTPArchiveMonitor`` records a live client's traffic with one; so does `TrellisTesting`'s
/// `RecordingTransport`. A transport of your own records its exchanges by sending through
/// ``record(_:bodyDecodedByTransport:exchange:)``.
///
/// The recorder keeps at most ``maximumEntries`` entries (the newest) and at most
/// ``maximumBodySize`` bytes of each body: a body past the limit is cut, and its entry says
/// how much was left out. Entries are listed in the order their requests started. A call
/// pays for copying what it sent and received; the entry is redacted and put in HAR's form
/// when ``archive`` is first read.
public final class HTTPArchiveRecorder: Sendable {
    /// How many entries the recorder keeps; past it, the oldest are forgotten.
    public let maximumEntries: Int
    /// How many bytes of each request and response body are kept.
    public let maximumBodySize: Int
    /// What the entries leave out.
    public let redaction: HTTPArchive.Redaction

    /// An exchange that has ended: as it was recorded, or built into its entry once read.
    private enum Recorded {
        case exchange(FinishedExchange)
        case entry(HTTPArchive.Entry)
    }

    private struct State {
        var nextSequence = 0
        /// In the order the exchanges ended (sorted by start when read); a ring, since a
        /// full recorder forgets one on each call (9% of a recorded GET against an array).
        var entries = CircularBuffer<(sequence: Int, recorded: Recorded)>()
        var forgotten = 0
    }

    private let state = NIOLockedValueBox(State())
    /// Told when an entry is complete (``HTTPArchiveMonitor`` writes its file then).
    private let entryAdded: (@Sendable (HTTPArchiveRecorder) -> Void)?

    /// A recorder that keeps `maximumEntries` entries with up to `maximumBodySize` bytes of
    /// each body, redacted by `redaction`.
    public convenience init(maximumEntries: Int = 1000, maximumBodySize: Int = 1 << 20, redaction: HTTPArchive.Redaction = .init()) {
        self.init(maximumEntries: maximumEntries, maximumBodySize: maximumBodySize, redaction: redaction, entryAdded: nil)
    }

    init(maximumEntries: Int, maximumBodySize: Int, redaction: HTTPArchive.Redaction, entryAdded: (@Sendable (HTTPArchiveRecorder) -> Void)?) {
        self.maximumEntries = max(1, maximumEntries)
        self.maximumBodySize = max(0, maximumBodySize)
        self.redaction = redaction
        self.entryAdded = entryAdded
    }

    /// The entries recorded so far, as an archive.
    public var archive: HTTPArchive {
        let (ended, forgotten) = state.withLockedValue { (Array($0.entries), $0.forgotten) }
        let recorded = ended.sorted { $0.sequence < $1.sequence }
        var entries: [HTTPArchive.Entry] = []
        var built: [Int: HTTPArchive.Entry] = [:]
        for (sequence, item) in recorded {
            switch item {
            case .entry(let entry):
                entries.append(entry)
            case .exchange(let exchange):
                let entry = exchange.entry(redaction: redaction, bodyLimit: maximumBodySize)
                entries.append(entry)
                built[sequence] = entry
            }
        }
        // Kept built, so that the next read (a file rewritten as entries end) builds only the
        // new ones.
        if !built.isEmpty {
            state.withLockedValue { state in
                for index in state.entries.indices {
                    if let entry = built[state.entries[index].sequence] { state.entries[index].recorded = .entry(entry) }
                }
            }
        }
        let comment = forgotten == 0 ? nil : "\(forgotten) older entries were left out (the recorder keeps \(maximumEntries))"
        return HTTPArchive(entries: entries, comment: comment)
    }

    /// Writes the entries recorded so far to `url` as a HAR file.
    public func write(to url: URL) throws {
        try archive.write(to: url)
    }

    /// Forgets every entry.
    public func removeAll() {
        state.withLockedValue { state in
            state.entries.removeAll()
            state.forgotten = 0
        }
    }

    /// Sends `request` through `exchange` and records the exchange: the request's body as it
    /// is taken, the response's head, and its body as the caller reads it. The entry is
    /// complete when the body has been read to its end, has failed, or has been abandoned.
    ///
    /// - Parameters:
    ///   - request: the request to send and record.
    ///   - bodyDecodedByTransport: whether the response's body arrives decoded from its
    ///     `Content-Encoding` (URLSession decodes it): the entry then leaves out
    ///     `Content-Encoding` and `Content-Length`, which describe bytes it does not hold.
    ///   - exchange: sends the request, with its body wrapped, and returns the response.
    public func record(
        _ request: Request,
        bodyDecodedByTransport: Bool = false,
        exchange: (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        let recording = ExchangeRecording(recorder: self, request: request, started: Date(), sequence: nextSequence())
        var sent = request
        if let body = request.body {
            if let bytes = body.bytes {
                recording.sentBody(bytes)
            } else {
                sent.body = recording.watchingSentBody(body)
            }
        }
        let response: Response<ResponseBody>
        do {
            response = try await exchange(sent)
        } catch {
            recording.finish(error: error)
            throw error
        }
        recording.received(response.head, bodyDecoded: bodyDecodedByTransport)
        if case .bytes(let buffer) = response.body.storage {
            recording.receivedChunk(buffer)
            recording.finish(error: nil)
            return response
        }
        return response.withBody(recording.watchingReceivedBody(response.body))
    }

    private func nextSequence() -> Int {
        state.withLockedValue { state in
            state.nextSequence += 1
            return state.nextSequence
        }
    }

    fileprivate func add(_ exchange: FinishedExchange, sequence: Int) {
        state.withLockedValue { state in
            state.entries.append((sequence, .exchange(exchange)))
            if state.entries.count > maximumEntries {
                state.entries.removeFirst()
                state.forgotten += 1
            }
        }
        entryAdded?(self)
    }
}

/// One exchange as it is recorded: what has been sent and received so far. Finished once, by
/// the body's end or failure, or by being dropped unread.
private final class ExchangeRecording: Sendable {
    struct State {
        var sentBody = ByteBuffer()
        var sentBytes = 0
        var head: HTTPResponse?
        var headArrived: ContinuousClock.Instant?
        var bodyDecoded = false
        var receivedBody = ByteBuffer()
        var receivedBytes = 0
        var chunks: [HTTPArchive.Chunk] = []
        var finished = false
    }

    /// Chunk arrivals kept per body; later ones are counted into the last.
    private static let maximumChunks = 4096

    private let recorder: HTTPArchiveRecorder
    private let request: Request
    private let started: Date
    private let startedInstant = ContinuousClock.now
    private let sequence: Int
    private let state = NIOLockedValueBox(State())

    init(recorder: HTTPArchiveRecorder, request: Request, started: Date, sequence: Int) {
        self.recorder = recorder
        self.request = request
        self.started = started
        self.sequence = sequence
    }

    deinit {
        finish(error: nil, abandoned: true)
    }

    func sentBody(_ chunk: ByteBuffer) {
        let limit = recorder.maximumBodySize
        state.withLockedValue { state in
            state.sentBytes += chunk.readableBytes
            Self.keep(chunk, in: &state.sentBody, upTo: limit)
        }
    }

    /// Copies as much of `chunk` into `kept` as `limit` leaves room for: a slice would keep
    /// all of the buffer it was cut from.
    private static func keep(_ chunk: ByteBuffer, in kept: inout ByteBuffer, upTo limit: Int) {
        let room = limit - kept.readableBytes
        guard room > 0 else { return }
        kept.writeImmutableBuffer(chunk.getSlice(at: chunk.readerIndex, length: min(room, chunk.readableBytes))!)
    }

    /// `body`, with each chunk the transport takes recorded; a body sent again (a transport
    /// that retries on its own) starts the record again.
    func watchingSentBody(_ body: RequestBody) -> RequestBody {
        let make: @Sendable () -> ChunkIterator = { [self] in
            state.withLockedValue { state in
                state.sentBody.clear()
                state.sentBytes = 0
            }
            var inner = body.makeChunkIterator()
            return ChunkIterator {
                let chunk = try await inner.next()
                if let chunk { self.sentBody(chunk) }
                return chunk
            }
        }
        let storage: RequestBody.Storage = body.isReplayable ? .replayableStream(make) : .stream(make)
        return RequestBody(storage: storage, length: body.length, contentType: body.defaultContentType)
    }

    func received(_ head: HTTPResponse, bodyDecoded: Bool) {
        state.withLockedValue { state in
            state.head = head
            state.headArrived = .now
            state.bodyDecoded = bodyDecoded
        }
    }

    func receivedChunk(_ chunk: ByteBuffer) {
        let limit = recorder.maximumBodySize
        state.withLockedValue { state in
            state.receivedBytes += chunk.readableBytes
            Self.keep(chunk, in: &state.receivedBody, upTo: limit)
            let time = state.headArrived.map { (ContinuousClock.now - $0).inMilliseconds } ?? 0
            if state.chunks.count < Self.maximumChunks {
                state.chunks.append(HTTPArchive.Chunk(time: time, size: chunk.readableBytes))
            } else {
                state.chunks[state.chunks.count - 1].size += chunk.readableBytes
            }
        }
    }

    /// `body`, each chunk recorded as the caller reads it; the entry ends with the body.
    func watchingReceivedBody(_ body: ResponseBody) -> ResponseBody {
        ResponseBody(expectedLength: body.expectedLength) { [self] in
            var chunks = body.makeAsyncIterator()
            return ChunkIterator {
                do {
                    guard let chunk = try await chunks.next() else {
                        self.finish(error: nil)
                        return nil
                    }
                    self.receivedChunk(chunk)
                    return chunk
                } catch {
                    self.finish(error: error)
                    throw error
                }
            }
        }
    }

    func finish(error: (any Error)?, abandoned: Bool = false) {
        let ended = ContinuousClock.now
        let finished = state.withLockedValue { state -> State? in
            guard !state.finished else { return nil }
            state.finished = true
            return state
        }
        guard let finished else { return }
        recorder.add(
            FinishedExchange(
                request: request,
                started: started,
                startedInstant: startedInstant,
                ended: ended,
                record: finished,
                error: error,
                abandoned: abandoned
            ),
            sequence: sequence
        )
    }
}

/// What was recorded of an exchange that has ended, to be built into its HAR entry.
private struct FinishedExchange: Sendable {
    let request: Request
    let started: Date
    let startedInstant: ContinuousClock.Instant
    let ended: ContinuousClock.Instant
    let record: ExchangeRecording.State
    let error: (any Error)?
    let abandoned: Bool

    func entry(redaction: HTTPArchive.Redaction, bodyLimit limit: Int) -> HTTPArchive.Entry {
        let state = record
        var notes: [String] = []

        let sentBody = request.body == nil ? nil : Data(buffer: state.sentBody)
        // Whatever the request's redacted fields and body fields carried is scrubbed from the
        // answer too: a server may echo a credential in a body or a field of any name.
        var secrets = redaction.secrets(in: request)
        var archived = HTTPArchive.Request(request, body: sentBody, bodySize: request.body == nil ? 0 : state.sentBytes, redaction: redaction, secrets: &secrets)
        if state.sentBytes > limit {
            archived.postData?.comment = "cut at \(limit) of \(state.sentBytes) bytes"
        }

        let wait = ((state.headArrived ?? ended) - startedInstant).inMilliseconds
        let receive = state.headArrived.map { (ended - $0).inMilliseconds } ?? 0
        let response: HTTPArchive.Response
        if let head = state.head {
            var fields = head.headerFields
            if state.bodyDecoded, fields[.contentEncoding] != nil {
                fields[.contentEncoding] = nil
                fields[.contentLength] = nil
                notes.append("the transport decoded the body; Content-Encoding and Content-Length are left out")
            }
            let mimeType = fields[.contentType] ?? ""
            var ignored: [String] = []
            let bytes = redaction.body(Data(buffer: state.receivedBody), mimeType: mimeType, secrets: &ignored)
            var (text, encoding) = HTTPArchive.text(of: bytes, contentEncoded: fields[.contentEncoding] != nil)
            if encoding == nil { text = HTTPArchive.Redaction.scrubbing(text, of: secrets) }
            var content = HTTPArchive.Content(
                size: state.receivedBytes,
                mimeType: mimeType,
                text: text,
                encoding: encoding,
                chunks: state.chunks.count > 1 ? state.chunks : nil
            )
            if state.receivedBytes > limit {
                content.comment = "cut at \(limit) of \(state.receivedBytes) bytes"
            }
            response = HTTPArchive.Response(
                status: head.status.code,
                statusText: head.status.reasonPhrase,
                httpVersion: HTTPArchive.unknownVersion,
                cookies: HTTPArchive.cookies(set: fields),
                headers: fields.map {
                    HTTPArchive.NameValue(name: $0.name.rawName, value: HTTPArchive.Redaction.scrubbing(redaction.value(of: $0, answering: request), of: secrets))
                },
                content: content,
                redirectURL: fields[.location].map { RequestLog.redactedURL($0, also: request.redactedQueryNames.union(redaction.queryNames)) } ?? "",
                headersSize: -1,
                bodySize: state.receivedBytes,
                comment: nil
            )
        } else {
            response = HTTPArchive.Response(
                status: 0,
                statusText: "",
                httpVersion: HTTPArchive.unknownVersion,
                cookies: [],
                headers: [],
                content: HTTPArchive.Content(size: 0, mimeType: ""),
                redirectURL: "",
                headersSize: -1,
                bodySize: -1,
                comment: nil
            )
        }
        if let error { notes.append("failed: \(error)") }
        if abandoned, state.head != nil { notes.append("the body was not read to its end") }
        return HTTPArchive.Entry(
            startedDateTime: started.formatted(Self.timestampStyle),
            time: wait + receive,
            request: archived,
            response: response,
            timings: HTTPArchive.Timings(send: 0, wait: wait, receive: receive),
            comment: notes.isEmpty ? nil : notes.joined(separator: "; ")
        )
    }

    private static let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

}

extension Duration {
    /// In milliseconds, to the microsecond: finer digits are noise in a file people read.
    fileprivate var inMilliseconds: Double {
        let (seconds, attoseconds) = components
        return ((Double(seconds) * 1000 + Double(attoseconds) / 1e15) * 1000).rounded() / 1000
    }
}
