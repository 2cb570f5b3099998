import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A raw TCP server that misbehaves on purpose, for faults an HTTP framework will not commit:
/// it reads a request head and then acts on its path.
///
/// - `/close`: closes the connection without a byte of response.
/// - `/reset`: sends a head announcing 100,000 bytes and 1,000 of them, then resets the
///   connection (RST).
/// - `/truncated-chunked`: a chunked body whose last chunk never comes; then closes.
/// - `/short`: announces 100 bytes, sends 10, closes.
/// - `/silent`: never answers.
/// - `/events-hold`: starts an event stream, sends one event, and holds the connection open.
final class FaultServer: Sendable {
    private let channel: any Channel
    private let connections = NIOLockedValueBox((opened: 0, closed: 0))
    /// Yields each time a connection closes.
    let closes: AsyncStream<Void>
    private let closeSink: AsyncStream<Void>.Continuation

    var url: URL { URL(string: "http://127.0.0.1:\(channel.localAddress!.port!)")! }
    /// Connections accepted and connections since closed (by either side).
    var connectionCounts: (opened: Int, closed: Int) { connections.withLockedValue { $0 } }

    init() async throws {
        let connections = self.connections
        let (closes, closeSink) = AsyncStream.makeStream(of: Void.self)
        self.closes = closes
        self.closeSink = closeSink
        channel = try await RawListener.bind { Handler(connections: connections, closeSink: closeSink) }
    }

    func stop() async throws {
        try await channel.close()
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let connections: NIOLockedValueBox<(opened: Int, closed: Int)>
        let closeSink: AsyncStream<Void>.Continuation
        private var received = ""
        private var answered = false

        init(connections: NIOLockedValueBox<(opened: Int, closed: Int)>, closeSink: AsyncStream<Void>.Continuation) {
            self.connections = connections
            self.closeSink = closeSink
        }

        func channelActive(context: ChannelHandlerContext) {
            connections.withLockedValue { $0.opened += 1 }
        }

        func channelInactive(context: ChannelHandlerContext) {
            connections.withLockedValue { $0.closed += 1 }
            closeSink.yield()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            received += String(buffer: Self.unwrapInboundIn(data))
            guard !answered, received.contains("\r\n\r\n") else { return }
            answered = true
            let path = received.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
            switch path {
            case "/close":
                context.close(promise: nil)
            case "/reset":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + String(repeating: " ", count: 1000))
                // A zero linger time turns the close into a reset.
                let channel = context.channel
                if let provider = channel as? any SocketOptionProvider {
                    provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
                } else {
                    context.close(promise: nil)
                }
            case "/truncated-chunked":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n[1, 2\r\n")
                context.close(promise: nil)
            case "/short":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[1, 2, 3,")
                context.close(promise: nil)
            case "/events-hold":
                write(context, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                let event = "data: first\n\n"
                write(context, String(event.utf8.count, radix: 16) + "\r\n" + event + "\r\n")
            default:
                break  // "/silent": the head never comes.
            }
        }

        private func write(_ context: ChannelHandlerContext, _ text: String) {
            context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(string: text)), promise: nil)
        }
    }
}

/// Hummingbird routes with faults a framework can commit: slow bodies, bad bodies, and
/// statuses that ask to be retried, with the attempts counted.
final class FlakyRoutes: Sendable {
    private let attempts = NIOLockedValueBox([String: Int]())

    /// How many requests `key` has seen.
    func attempts(for key: String) -> Int { attempts.withLockedValue { $0[key] ?? 0 } }

    func install(_ router: Router<BasicRequestContext>) {
        for method in [HTTPRequest.Method.get, .post] {
            router.on("trickle", method: method) { _, _ in
                // A byte every 20 ms, forever: never done, never silent long enough to look dead.
                Response(status: .ok, headers: [.contentType: "application/json"], body: .init { writer in
                    while true {
                        try await writer.write(ByteBuffer(string: " "))
                        try await Task.sleep(for: .milliseconds(20))
                    }
                })
            }
        }
        router.get("invalid-json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{\"id\": 1, \"title\": ")))
        }
        // `/flaky/<key>?status=503&failures=2&retryAfter=1`: `failures` answers of `status`
        // (with `Retry-After` when given), then 200 with the attempt number.
        for method in [HTTPRequest.Method.get, .post, .put] {
            router.on("flaky/:key", method: method) { request, context in
                let key = try context.parameters.require("key")
                // Counted before the body is read: an attempt whose body never comes counts.
                let attempt = self.attempts.withLockedValue { counts in
                    counts[key, default: 0] += 1
                    return counts[key]!
                }
                for try await _ in request.body {}
                let query = request.uri.queryParameters
                let failures = query["failures"].flatMap { Int(String($0)) } ?? 1
                guard attempt > failures else {
                    let status = query["status"].flatMap { Int(String($0)) } ?? 503
                    var headers: HTTPFields = [:]
                    if let retryAfter = query["retryAfter"] { headers[.retryAfter] = String(retryAfter) }
                    return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(string: "try again")))
                }
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{\"attempt\": \(attempt)}")))
            }
        }
    }
}

struct Attempt: Decodable, Equatable {
    var attempt: Int
}

/// A port on 127.0.0.1 that refuses connections and that no other server can take while this
/// is alive: a socket bound to it that never listens. (A port freed after a bind can be taken
/// at once by a server another test starts.)
final class RefusingPort: Sendable {
    private let descriptor: Int32
    let port: Int

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        close(descriptor)
    }
}
