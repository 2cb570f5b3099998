import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A raw TCP server that lies, stalls, floods and redirects, for the holes a client must not
/// have. It reads request heads (bodiless requests, several per connection) and acts on each
/// path; every head it reads is recorded.
///
/// - `/record`: 200 with `ok`, keeping the connection.
/// - `/redirect?to=URL`: 302 to `URL`, keeping the connection.
/// - `/stall-redirect?to=URL`: 302 to `URL` announcing a 1,000-byte body, 10 bytes of it, then
///   nothing.
/// - `/silent`: never answers.
/// - `/stall-body`: 200 announcing 1,000 bytes, 10 of them, then nothing.
/// - `/stall-events`: an event stream with one event, then nothing.
/// - `/broken-events`: an event stream with one event, then a chunk size that is not a number.
/// - `/flood`: a chunked body that never ends, written as fast as the client takes it, up to
///   4 GiB, then held; how much was written before the client went away goes to
///   ``floodEnded``.
/// - `/flood-lines`: the same flood made of JSON lines (`{"response":"tick","done":false}`),
///   labelled `application/x-ndjson`.
/// - `/flood-json/…`: the same flood labelled `application/json`, at any path under it (for
///   clients that append their own, as generated OpenAPI clients do).
/// - `/503`: 503 with no body.
/// - `/partial`: 206 with `Content-Range: bytes 0-99/1000` and 100 bytes, to a request that
///   asked for no range.
/// - `/endless-event`: an event stream whose first line never ends (2 MiB of `A`), then held.
/// - `/retry-zero`: an event stream of `retry: 0` and no event, then the connection closes.
/// - `/once-per-connection`: 200 to the first request of a connection (kept alive); a later
///   request on the same connection gets the connection closed without a byte, as a server
///   that timed out an idle keep-alive connection does.
/// - `/cut-short`: 200 with `Content-Length: 10`, 3 bytes, and the connection closed.
/// - `/chunked-trailer`: a chunked `ok` with a trailer field, `X-Checksum`, announced in
///   `Trailer`.
/// - `/status-1000`, `/status-99`, `/status-000`: a status line with a status of four digits,
///   of two, or under 100, then `ok` as a body of 2 bytes.
/// - `/not-http`: another protocol's greeting (SSH's), and the connection held open.
/// - `/endless-headers`: a status line, then header lines without end, as fast as the client
///   reads them; the bytes written before the client went away go to ``floodEnded``.
/// - `/endless-informational`: `100 Continue` heads without end, the same way.
/// - `/trickle-head`: a status line, then a header line every 200 ms for 5 minutes (or until
///   the client goes), and never the head's end.
/// - `/early-hints`: `103 Early Hints` with a `Link` field, then 200 with `ok`.
/// - `/conflicting-lengths`: two `Content-Length` fields, 3 and 5, and 5 bytes.
/// - `/length-and-chunked`: `Content-Length: 3` beside a chunked body of 5 bytes.
/// - `/overlong-length`: a `Content-Length` no 64-bit integer holds, and 3 bytes.
/// - `/overlong-chunk`: a chunk size of 18 hex digits.
/// Each of the last four is held open after what it sends.
/// - `/late-response`: 200 with `ok`, then, once that has gone out, a second response
///   (`forged`) that no request asked for, the connection kept.
/// - `/refuse-upload`: 413 with `too big` and `Connection: close` as soon as the head is
///   read; whatever body follows is read and dropped until the client closes the connection.
final class HostileServer: RawTestServer {
    /// How much a flood writes at most before it holds the connection, sending nothing more
    /// and never ending: a client that took it all must still close the connection for the
    /// flood to end. A bound on the bytes a client takes before it stops would race the
    /// machine's load: with the whole suite running on two cores, FoundationNetworking has
    /// taken as long to act on a cancelled task as the server took to send 4 GiB.
    static let floodLimit = 1 << 32

    private let channel: any Channel
    private let state = NIOLockedValueBox(State())
    /// Yields once when a flood ends, with the bytes written: when a write fails, or when the
    /// client closes a connection held at ``floodLimit``.
    let floodEnded: AsyncStream<Int>
    private let floodSink: AsyncStream<Int>.Continuation
    /// Yields each time a connection closes, by either side.
    let closures: AsyncStream<Void>
    private let closureSink: AsyncStream<Void>.Continuation
    /// Yields the request line of each request as it arrives.
    let arrivals: AsyncStream<String>

    struct State {
        var heads: [String] = []
        var connectionsOpened = 0
        var connectionsClosed = 0
    }

    var url: URL { URL(string: "http://127.0.0.1:\(channel.localAddress!.port!)")! }
    /// Every request head read, in order.
    var heads: [String] { state.withLockedValue { $0.heads } }
    var connectionsOpened: Int { state.withLockedValue { $0.connectionsOpened } }

    init() async throws {
        let state = self.state
        let (floodEnded, floodSink) = AsyncStream.makeStream(of: Int.self)
        self.floodEnded = floodEnded
        self.floodSink = floodSink
        let (closures, closureSink) = AsyncStream.makeStream(of: Void.self)
        self.closures = closures
        self.closureSink = closureSink
        let (arrivals, arrivalSink) = AsyncStream.makeStream(of: String.self)
        self.arrivals = arrivals
        channel = try await RawListener.bind {
            Handler(state: state, floodSink: floodSink, closureSink: closureSink, arrivalSink: arrivalSink)
        }
    }

    func stop() async throws {
        try await channel.close()
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let state: NIOLockedValueBox<State>
        let floodSink: AsyncStream<Int>.Continuation
        let closureSink: AsyncStream<Void>.Continuation
        let arrivalSink: AsyncStream<String>.Continuation
        private var received = ""
        private var requestsOnConnection = 0
        /// Whether what comes in is dropped unread (after a refusal).
        private var discarding = false
        /// The bytes a flood wrote before it was held at ``HostileServer/floodLimit``.
        private var heldFlood: Int?

        init(
            state: NIOLockedValueBox<State>,
            floodSink: AsyncStream<Int>.Continuation,
            closureSink: AsyncStream<Void>.Continuation,
            arrivalSink: AsyncStream<String>.Continuation
        ) {
            self.state = state
            self.floodSink = floodSink
            self.closureSink = closureSink
            self.arrivalSink = arrivalSink
        }

        func channelActive(context: ChannelHandlerContext) {
            state.withLockedValue { $0.connectionsOpened += 1 }
        }

        func channelInactive(context: ChannelHandlerContext) {
            state.withLockedValue { $0.connectionsClosed += 1 }
            if let heldFlood { floodSink.yield(heldFlood) }
            closureSink.yield()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !discarding else { return }
            received += String(buffer: Self.unwrapInboundIn(data))
            while !discarding, let end = received.range(of: "\r\n\r\n") {
                let head = String(received[..<end.lowerBound])
                received = String(received[end.upperBound...])
                requestsOnConnection += 1
                state.withLockedValue { $0.heads.append(head) }
                arrivalSink.yield(String(head.prefix { $0 != "\r" }))
                answer(head, context: context)
            }
        }

        private func answer(_ head: String, context: ChannelHandlerContext) {
            let target = head.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
            let components = URLComponents(string: target)
            let path = components?.path ?? target
            let redirectTarget = components?.queryItems?.first { $0.name == "to" }?.value ?? "/record"
            switch path {
            case "/record":
                write(context, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            case "/redirect":
                write(context, "HTTP/1.1 302 Found\r\nLocation: \(redirectTarget)\r\nContent-Length: 0\r\n\r\n")
            case "/stall-redirect":
                write(context, "HTTP/1.1 302 Found\r\nLocation: \(redirectTarget)\r\nContent-Length: 1000\r\n\r\n0123456789")
            case "/stall-body":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n0123456789")
            case "/stall-events":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                writeChunk(context, "data: one\n\n")
            case "/broken-events":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                writeChunk(context, "data: one\n\n")
                write(context, "zz\r\ndata: two\n\n\r\n")
            case "/flood":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                flood(context, repeating: Self.framedChunk, counted: 64 * 1024)
            case "/flood-lines":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")
                flood(context, repeating: Self.framedLines.chunk, counted: Self.framedLines.lineBytes)
            case _ where path.hasPrefix("/flood-json/"):
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                flood(context, repeating: Self.framedChunk, counted: 64 * 1024)
            case "/503":
                write(context, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            case "/partial":
                write(context, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-99/1000\r\nContent-Length: 100\r\n\r\n" + String(repeating: "p", count: 100))
            case "/endless-event":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                writeChunk(context, "data: " + String(repeating: "A", count: 2 << 20))
            case "/retry-zero":
                let body = "retry: 0\n\n"
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body)
                context.close(promise: nil)
            case "/once-per-connection":
                if requestsOnConnection == 1 {
                    write(context, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
                } else {
                    context.close(promise: nil)
                }
            case "/chunked-trailer":
                write(context, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n2\r\nok\r\n0\r\nX-Checksum: 1\r\n\r\n")
            case "/status-1000":
                write(context, "HTTP/1.1 1000 Odd\r\nContent-Length: 2\r\n\r\nok")
            case "/status-99":
                write(context, "HTTP/1.1 99 Odd\r\nContent-Length: 2\r\n\r\nok")
            case "/status-000":
                write(context, "HTTP/1.1 000 Odd\r\nContent-Length: 2\r\n\r\nok")
            case "/cut-short":
                write(context, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
                context.close(promise: nil)
            case "/not-http":
                // Another protocol's greeting, and the connection held open.
                write(context, "SSH-2.0-OpenSSH_9.6\r\n")
            case "/endless-headers":
                write(context, "HTTP/1.1 200 OK\r\n")
                let lines = Self.repeated("X-Filler: " + String(repeating: "h", count: 1000) + "\r\n")
                flood(context, repeating: lines, counted: lines.readableBytes)
            case "/conflicting-lengths":
                write(context, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nhello")
            case "/length-and-chunked":
                write(context, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            case "/overlong-length":
                write(context, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nabc")
            case "/overlong-chunk":
                write(context, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\nabc")
            case "/late-response":
                // The answer, then a second one nobody asked for, once the first has gone out.
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))).whenSuccess {
                    let (handler, context) = loopBound.value
                    handler.write(context, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
                }
            case "/refuse-upload":
                // Refused on sight of the head, with the connection to be closed; the body that
                // follows is read and dropped until the client closes it, as servers that refuse
                // early do (nginx's lingering close). Closing at once, with the body unread,
                // would reset the connection and could take the refusal with it.
                discarding = true
                write(context, "HTTP/1.1 413 Content Too Large\r\nContent-Length: 7\r\nConnection: close\r\n\r\ntoo big")
            case "/early-hints":
                write(context, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            case "/trickle-head":
                write(context, "HTTP/1.1 200 OK\r\n")
                trickle(context, linesLeft: 1500)
            case "/endless-informational":
                let heads = Self.repeated("HTTP/1.1 100 Continue\r\n\r\n")
                flood(context, repeating: heads, counted: heads.readableBytes)
            default:
                break  // "/silent"
            }
        }

        /// A chunk of 64 KiB of `x`, framed for a chunked body.
        private static let framedChunk: ByteBuffer = {
            let size = 64 * 1024
            var chunk = ByteBuffer(string: String(size, radix: 16) + "\r\n")
            chunk.writeRepeatingByte(UInt8(ascii: "x"), count: size)
            chunk.writeString("\r\n")
            return chunk
        }()

        /// A chunk of JSON lines (`{"response":"tick","done":false}`), and how many bytes of lines it holds.
        private static let framedLines: (chunk: ByteBuffer, lineBytes: Int) = {
            let lines = repeated(#"{"response":"tick","done":false}"# + "\n")
            var chunk = ByteBuffer(string: String(lines.readableBytes, radix: 16) + "\r\n")
            chunk.writeImmutableBuffer(lines)
            chunk.writeString("\r\n")
            return (chunk, lines.readableBytes)
        }()

        /// `line` repeated to fill 64 KiB.
        private static func repeated(_ line: String) -> ByteBuffer {
            var piece = ByteBuffer()
            while piece.readableBytes + line.utf8.count <= 64 * 1024 { piece.writeString(line) }
            return piece
        }

        /// Writes `piece` again and again, as fast as the client takes it, counting `counted`
        /// bytes for each, until a failed write (the client went away) or
        /// ``HostileServer/floodLimit``, where the connection is held until the client closes
        /// it; then the count to `floodEnded`.
        private func flood(_ context: ChannelHandlerContext, repeating piece: ByteBuffer, counted: Int, sent: Int = 0) {
            guard sent < HostileServer.floodLimit else {
                heldFlood = sent
                return
            }
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.writeAndFlush(Self.wrapOutboundOut(piece)).whenComplete { result in
                let (handler, context) = loopBound.value
                switch result {
                case .success: handler.flood(context, repeating: piece, counted: counted, sent: sent + counted)
                case .failure: handler.floodSink.yield(sent)
                }
            }
        }

        /// A header line every 200 ms, `linesLeft` of them (5 min), and never the head's end:
        /// each line restarts a timer that waits for the next byte.
        private func trickle(_ context: ChannelHandlerContext, linesLeft: Int) {
            guard linesLeft > 0, context.channel.isActive else { return }
            write(context, "X-Trickle: \(linesLeft)\r\n")
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(200)) {
                let (handler, context) = loopBound.value
                handler.trickle(context, linesLeft: linesLeft - 1)
            }
        }

        private func write(_ context: ChannelHandlerContext, _ text: String) {
            context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(string: text)), promise: nil)
        }

        private func writeChunk(_ context: ChannelHandlerContext, _ text: String) {
            write(context, String(text.utf8.count, radix: 16) + "\r\n" + text + "\r\n")
        }
    }
}
