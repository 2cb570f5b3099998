import NIOCore

/// One event of a `text/event-stream` (WHATWG HTML, "Server-sent events").
public struct ServerSentEvent: Sendable, Equatable {
    /// The `event` field; `"message"` when the server named none.
    public var type: String
    /// The `data` lines, joined with line feeds.
    public var data: String
    /// The last event ID in force when the event was dispatched (`id` field), sent back as
    /// `Last-Event-ID` when the stream reconnects.
    public var id: String?
    /// The reconnection delay the server asked for with a `retry` field, if this event's block
    /// had one.
    public var retry: Duration?

    /// An event of `type` (`message` by default) carrying `data`, with the `id` and `retry`
    /// fields a server may send.
    public init(type: String = "message", data: String, id: String? = nil, retry: Duration? = nil) {
        self.type = type
        self.data = data
        self.id = id
        self.retry = retry
    }
}

/// Turns the bytes of a `text/event-stream` into events, as the WHATWG parsing rules say:
/// UTF-8 with an optional leading BOM, lines ending in CRLF, LF or CR (also when a chunk ends
/// between CR and LF), comments, `data` lines joined by LF, `id` without NUL, `retry` in
/// digits only, and a block without data dispatching nothing. An unfinished block at the end of
/// the stream is dropped. An event (its lines and data together) larger than
/// ``maximumEventSize`` fails the stream rather than grow without bound.
struct EventStreamParser {
    private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// The first bytes of a connection's stream while they may still be a BOM.
    private var start: [UInt8]? = []
    private var line: [UInt8] = []
    private var lastWasCR = false
    private var data: [UInt8] = []
    private var hasData = false
    private var type = ""
    private var retry: Duration?
    /// The last event ID buffer: it outlives each event and the connection.
    private(set) var lastEventID: String?
    /// The reconnection time the server asked for, if it did.
    private(set) var reconnectionTime: Duration?

    /// The most bytes one event may take: its unfinished line, its data and its type.
    let maximumEventSize: Int

    init(lastEventID: String? = nil, maximumEventSize: Int = EventStreamParser.defaultMaximumEventSize) {
        self.lastEventID = lastEventID
        self.maximumEventSize = max(1, maximumEventSize)
    }

    /// 1 MiB.
    static let defaultMaximumEventSize = 1024 * 1024

    /// Parses `bytes`, returning the events they complete.
    ///
    /// - Throws: ``TrellisError/responseTooLarge(_:)`` when an event grows past
    ///   ``maximumEventSize``; the parser must not be used after that.
    mutating func parse(_ bytes: some Sequence<UInt8>) throws -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            guard var held = start else {
                consume(byte, into: &events)
                try checkSize()
                continue
            }
            held.append(byte)
            if Self.byteOrderMark.starts(with: held) {
                start = held.count == Self.byteOrderMark.count ? nil : held
                continue
            }
            start = nil
            for heldByte in held { consume(heldByte, into: &events) }
            try checkSize()
        }
        // What the limit bounds is the event as the caller gets it: bytes that are not UTF-8
        // each become a three-byte replacement character when decoded.
        for event in events where event.data.utf8.count + event.type.utf8.count > maximumEventSize {
            throw TrellisError.responseTooLarge(ResponseTooLarge(
                limit: maximumEventSize, announcedLength: nil, subject: "a server-sent event"
            ))
        }
        return events
    }

    private func checkSize() throws {
        guard line.count + data.count + type.utf8.count > maximumEventSize else { return }
        throw TrellisError.responseTooLarge(ResponseTooLarge(
            limit: maximumEventSize, announcedLength: nil, subject: "a server-sent event"
        ))
    }

    /// Starts a new connection: a partial line or block of the old one is dropped, the last
    /// event ID and reconnection time are kept.
    mutating func reset() {
        start = []
        line.removeAll()
        lastWasCR = false
        data.removeAll()
        hasData = false
        type = ""
        retry = nil
    }

    private mutating func consume(_ byte: UInt8, into events: inout [ServerSentEvent]) {
        if lastWasCR {
            lastWasCR = false
            if byte == UInt8(ascii: "\n") { return }
        }
        switch byte {
        case UInt8(ascii: "\r"):
            lastWasCR = true
            endLine(into: &events)
        case UInt8(ascii: "\n"):
            endLine(into: &events)
        default:
            line.append(byte)
        }
    }

    private mutating func endLine(into events: inout [ServerSentEvent]) {
        defer { line.removeAll(keepingCapacity: true) }
        guard !line.isEmpty else {
            dispatch(into: &events)
            return
        }
        if line.first == UInt8(ascii: ":") { return }
        let field: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            field = line[..<colon]
            value = line[(colon + 1)...]
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        } else {
            field = line[...]
            value = []
        }
        switch String(decoding: field, as: UTF8.self) {
        case "event":
            type = String(decoding: value, as: UTF8.self)
        case "data":
            if hasData { data.append(UInt8(ascii: "\n")) }
            data.append(contentsOf: value)
            hasData = true
        case "id":
            if !value.contains(0) {
                lastEventID = String(decoding: value, as: UTF8.self)
            }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                let milliseconds = Int64(String(decoding: value, as: UTF8.self))
            {
                let delay = Duration.milliseconds(milliseconds)
                reconnectionTime = delay
                retry = delay
            }
        default:
            break
        }
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        defer {
            data.removeAll(keepingCapacity: true)
            hasData = false
            type = ""
            retry = nil
        }
        guard hasData else { return }
        events.append(ServerSentEvent(
            type: type.isEmpty ? "message" : type,
            data: String(decoding: data, as: UTF8.self),
            id: lastEventID,
            retry: retry
        ))
    }
}
