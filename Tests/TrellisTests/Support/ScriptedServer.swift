import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// A raw HTTP/1.1 server whose every answer a test writes byte for byte: it reads each request
/// (its head, and a body of the length its `Content-Length` gives), records it, and writes what
/// `script` returns for it, keeping the connection (or closes it, without a byte, when the
/// script returns nothing). For the hostile surfaces where a test needs
/// one exact answer (a `304` with an `Age` no integer holds, a body that overruns its length)
/// rather than a route of ``HostileServer``.
final class ScriptedServer: StoppableTestServer {
    /// A request as the server read it.
    struct Received: Sendable {
        /// The request line and header lines, as sent.
        let head: String
        let method: String
        /// The request target: path and query.
        let target: String
        /// Which request of its connection this was, from 1.
        let numberOnConnection: Int
        /// The body, as sent.
        var body: [UInt8] = []
        /// How many reads of the connection carried its bytes: 1 when its head and body came
        /// in one segment.
        var reads = 1
        /// When the server read it.
        var arrived = ContinuousClock.now

        /// The value of the first header field named `name` (any case), trimmed.
        func field(_ name: String) -> String? {
            for line in head.split(separator: "\r\n").dropFirst() {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                    return parts[1].trimmingCharacters(in: .whitespaces)
                }
            }
            return nil
        }
    }

    typealias Script = @Sendable (Received) -> String

    /// What a script returns to answer nothing and keep the connection open: a server that stalls.
    static let noAnswer = "\u{0}no answer"

    /// What a script returns to write `answer` and then close the connection: with an answer
    /// cut short of its `Content-Length`, a connection that breaks in the middle of a response.
    static func thenClose(_ answer: String) -> String { closeMark + answer }
    private static let closeMark = "\u{0}close\u{0}"

    /// What a script returns to hold `answer` back until the test calls ``releaseHeld()``.
    static func held(_ answer: String) -> String { heldMark + answer }
    private static let heldMark = "\u{0}held\u{0}"

    /// Answers held back, and the most that were held back at once.
    struct Held {
        var waiting: [(channel: any Channel, answer: String)] = []
        var mostAtOnce = 0
    }

    private let channel: any Channel
    private let received = NIOLockedValueBox<[Received]>([])
    private let heldAnswers = NIOLockedValueBox(Held())
    /// Yields each request as it is read.
    let arrivals: AsyncStream<Received>
    /// Yields the head of each request as soon as it is read, before its body.
    let headArrivals: AsyncStream<String>
    /// Yields each time a connection closes, by either side.
    let closes: AsyncStream<Void>

    var url: URL { URL(string: "http://127.0.0.1:\(channel.localAddress!.port!)")! }
    /// Every request read, in order.
    var requests: [Received] { received.withLockedValue { $0 } }

    init(_ script: @escaping Script) async throws {
        let received = self.received
        let held = self.heldAnswers
        let (arrivals, arrivalSink) = AsyncStream.makeStream(of: Received.self)
        let (closes, closeSink) = AsyncStream.makeStream(of: Void.self)
        let (headArrivals, headSink) = AsyncStream.makeStream(of: String.self)
        self.arrivals = arrivals
        self.closes = closes
        self.headArrivals = headArrivals
        channel = try await RawListener.bind {
            Handler(script: script, received: received, held: held, arrivalSink: arrivalSink, closeSink: closeSink, headSink: headSink)
        }
    }

    /// The most answers held back at one time so far.
    var mostHeldAtOnce: Int { heldAnswers.withLockedValue { $0.mostAtOnce } }

    /// Sends the answer held back longest, if any; with `text`, the longest held among those
    /// that contain it (for a test whose requests may reach the server in either order).
    func releaseOldestHeld(containing text: String? = nil) {
        let chosen = heldAnswers.withLockedValue { held in
            held.waiting.firstIndex { entry in text.map { entry.answer.contains($0) } ?? true }.map { held.waiting.remove(at: $0) }
        }
        if let (channel, answer) = chosen { channel.writeAndFlush(ByteBuffer(string: answer), promise: nil) }
    }

    /// Sends every answer held back so far.
    func releaseHeld() {
        let waiting = heldAnswers.withLockedValue { held in
            defer { held.waiting = [] }
            return held.waiting
        }
        for (channel, answer) in waiting { channel.writeAndFlush(ByteBuffer(string: answer), promise: nil) }
    }

    func stop() async throws {
        try await channel.close()
    }

    /// Runs `body` with a started server, and stops it afterwards, whether `body` threw or not.
    static func with<Result: Sendable>(_ script: @escaping Script, _ body: (ScriptedServer) async throws -> Result) async throws -> Result {
        try await running({ try await ScriptedServer(script) }, body)
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let script: Script
        let received: NIOLockedValueBox<[Received]>
        let held: NIOLockedValueBox<Held>
        let arrivalSink: AsyncStream<Received>.Continuation
        let closeSink: AsyncStream<Void>.Continuation
        let headSink: AsyncStream<String>.Continuation
        /// Whether the head of the request being read has been yielded.
        private var headYielded = false
        private var buffered: [UInt8] = []
        private var requestsOnConnection = 0
        /// Reads since the last whole request was taken (the one that ended it included, when
        /// it left bytes of the next).
        private var readsOfThisRequest = 0

        init(
            script: @escaping Script,
            received: NIOLockedValueBox<[Received]>,
            held: NIOLockedValueBox<Held>,
            arrivalSink: AsyncStream<Received>.Continuation,
            closeSink: AsyncStream<Void>.Continuation,
            headSink: AsyncStream<String>.Continuation
        ) {
            self.script = script
            self.received = received
            self.held = held
            self.arrivalSink = arrivalSink
            self.closeSink = closeSink
            self.headSink = headSink
        }

        func channelInactive(context: ChannelHandlerContext) {
            closeSink.yield()
            context.fireChannelInactive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            buffered += buffer.readBytes(length: buffer.readableBytes) ?? []
            readsOfThisRequest += 1
            while let request = nextRequest() {
                requestsOnConnection += 1
                let line = request.head.split(separator: "\r\n").first ?? ""
                let words = line.split(separator: " ")
                let received = Received(
                    head: request.head,
                    method: words.first.map(String.init) ?? "",
                    target: words.dropFirst().first.map(String.init) ?? "/",
                    numberOnConnection: requestsOnConnection,
                    body: request.body,
                    reads: readsOfThisRequest
                )
                readsOfThisRequest = buffered.isEmpty ? 0 : 1
                self.received.withLockedValue { $0.append(received) }
                let answer = script(received)
                if answer.hasPrefix(ScriptedServer.heldMark) {
                    let channel = context.channel
                    held.withLockedValue { held in
                        held.waiting.append((channel, String(answer.dropFirst(ScriptedServer.heldMark.count))))
                        held.mostAtOnce = max(held.mostAtOnce, held.waiting.count)
                    }
                    arrivalSink.yield(received)
                    continue
                }
                arrivalSink.yield(received)
                if answer == ScriptedServer.noAnswer { continue }
                guard !answer.isEmpty else {
                    context.close(promise: nil)
                    return
                }
                if answer.hasPrefix(ScriptedServer.closeMark) {
                    let written = ByteBuffer(string: String(answer.dropFirst(ScriptedServer.closeMark.count)))
                    context.writeAndFlush(wrapOutboundOut(written)).whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
                    return
                }
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer)), promise: nil)
            }
        }

        /// The next whole request in what has been read, taken out of it.
        private func nextRequest() -> (head: String, body: [UInt8])? {
            let end: [UInt8] = Array("\r\n\r\n".utf8)
            guard buffered.count >= 4, let index = (0...(buffered.count - 4)).first(where: { Array(buffered[$0..<$0 + 4]) == end })
            else { return nil }
            let head = String(decoding: buffered[..<index], as: UTF8.self)
            if !headYielded {
                headYielded = true
                headSink.yield(head)
            }
            let length = head.split(separator: "\r\n").lazy.compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
            guard buffered.count >= index + 4 + length else { return nil }
            let body = Array(buffered[(index + 4)..<(index + 4 + length)])
            buffered.removeFirst(index + 4 + length)
            headYielded = false
            return (head, body)
        }
    }
}

extension ScriptedServer {
    /// A response with `fields` (each `Name: value`), a `Content-Length` and `body`.
    static func response(_ status: String, _ fields: [String] = [], body: String = "") -> String {
        "HTTP/1.1 \(status)\r\n" + fields.map { $0 + "\r\n" }.joined() + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
    }

    /// A script that answers the first request with `first` and every other with `others`.
    static func answering(first: String, others: String) -> Script {
        let isFirst = NIOLockedValueBox(true)
        return { _ in
            isFirst.withLockedValue { isFirst in
                defer { isFirst = false }
                return isFirst
            } ? first : others
        }
    }
}
