import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A TLS server that speaks HTTP/2 alone (ALPN `h2`), for the faults of a server reached over
/// HTTP/2 through AsyncHTTPClient. It answers each stream by its `:path`:
///
/// - `/status-000`: `:status` 000, then `ok` as a body of 2 bytes.
/// - `/status-negative`: `:status` -5, then the same.
/// - `/flood`: 200 and a body that never ends, sent as fast as the stream's flow control
///   lets it, up to 4 GiB; how much was sent before the client reset the stream goes to
///   ``floodEnded``.
/// - `/no-status`: a head without `:status`, then `ok`.
/// - `/longer-than-announced`, `/shorter-than-announced`: 200 announcing 2 or 10 bytes, then 5.
/// - `/stall-body`: 200 announcing 1,000 bytes, 10 of them, then nothing.
/// - `/reset`: 200 announcing 100 bytes, 10 of them, then `RST_STREAM` with `INTERNAL_ERROR`.
/// - `/header-bomb`: 200 with a header block of 16 MB once decoded, a few kilobytes on the
///   wire (one 4,000-byte field 4,000 times, indexed by HPACK after the first), then `ok`.
/// - anything else: 200 with `ok`.
///
/// It checks nothing it sends (SwiftNIO's header block and content-length validation are off),
/// so that it can break HTTP/2 where a route says so. Its certificate is for `localhost`, from
/// ``certificates``' authority.
final class HostileHTTP2Server: RawTestServer {
    let certificates: TestCertificates
    private let channel: any Channel
    private let paths = NIOLockedValueBox<[String]>([])
    /// Yields once when a flood's stream closes, with the bytes sent.
    let floodEnded: AsyncStream<Int>

    var url: URL { URL(string: "https://localhost:\(channel.localAddress!.port!)")! }
    /// The `:path` of every stream opened, in order.
    var requestedPaths: [String] { paths.withLockedValue { $0 } }

    init() async throws {
        let certificates = try TestCertificates()
        self.certificates = certificates
        let (floodEnded, floodSink) = AsyncStream.makeStream(of: Int.self)
        self.floodEnded = floodEnded
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificates.leaf)],
            privateKey: .privateKey(certificates.leafKey)
        )
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let paths = self.paths
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }.flatMap {
                    // The server checks nothing it sends, so that it can send what HTTP/2 forbids.
                    var connection = NIOHTTP2Handler.ConnectionConfiguration()
                    connection.headerBlockValidation = .disabled
                    connection.contentLengthValidation = .disabled
                    return channel.configureHTTP2Pipeline(
                        mode: .server,
                        connectionConfiguration: connection,
                        streamConfiguration: NIOHTTP2Handler.StreamConfiguration(),
                        inboundStreamInitializer: { stream in
                            stream.eventLoop.makeCompletedFuture {
                                try stream.pipeline.syncOperations.addHandler(StreamHandler(paths: paths, floodSink: floodSink))
                            }
                        }
                    ).map { _ in }
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func stop() async throws {
        try await channel.close()
    }

    /// One stream's answer; its state is the stream's event loop's alone.
    private final class StreamHandler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTP2Frame.FramePayload
        typealias OutboundOut = HTTP2Frame.FramePayload

        static let floodLimit = 1 << 32
        static let floodChunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 * 1024)

        let paths: NIOLockedValueBox<[String]>
        let floodSink: AsyncStream<Int>.Continuation
        /// The bytes of a flood sent so far, or `nil` when the stream is not a flood.
        private var flooded: Int?

        init(paths: NIOLockedValueBox<[String]>, floodSink: AsyncStream<Int>.Continuation) {
            self.paths = paths
            self.floodSink = floodSink
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .headers(let request) = Self.unwrapInboundIn(data) else { return }
            let path = request.headers.first(name: ":path") ?? ""
            paths.withLockedValue { $0.append(path) }
            switch path {
            case "/flood":
                context.writeAndFlush(Self.wrapOutboundOut(.headers(.init(headers: [":status": "200"]))), promise: nil)
                flooded = 0
                flood(context)
            case "/header-bomb":
                // One large field repeated: after the first, each copy is a byte or two on the
                // wire (HPACK's dynamic table), and 16 MB once decoded.
                var head = HPACKHeaders([(":status", "200"), ("content-length", "2")])
                let value = String(repeating: "a", count: 4000)
                for _ in 0..<4000 { head.add(name: "x-bomb", value: value) }
                context.write(Self.wrapOutboundOut(.headers(.init(headers: head))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(string: "ok")), endStream: true))), promise: nil)
            case "/reset":
                context.write(Self.wrapOutboundOut(.headers(.init(headers: [":status": "200", "content-length": "100"]))), promise: nil)
                context.write(Self.wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(string: "0123456789"))))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.rstStream(.internalError)), promise: nil)
            case "/no-status":
                context.write(Self.wrapOutboundOut(.headers(.init(headers: HPACKHeaders([("content-length", "2")])))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(string: "ok")), endStream: true))), promise: nil)
            case "/longer-than-announced", "/shorter-than-announced":
                let announced = path == "/longer-than-announced" ? "2" : "10"
                context.write(Self.wrapOutboundOut(.headers(.init(headers: [":status": "200", "content-length": announced]))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(string: "okay!")), endStream: true))), promise: nil)
            case "/stall-body":
                context.write(Self.wrapOutboundOut(.headers(.init(headers: [":status": "200", "content-length": "1000"]))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(string: "0123456789"))))), promise: nil)
            default:
                let status = ["/status-000": "000", "/status-negative": "-5"][path] ?? "200"
                let head = HPACKHeaders([(":status", status), ("content-length", "2")])
                context.write(Self.wrapOutboundOut(.headers(.init(headers: head))), promise: nil)
                let body = HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(ByteBuffer(string: "ok")), endStream: true))
                context.writeAndFlush(Self.wrapOutboundOut(body), promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            if let flooded { floodSink.yield(flooded) }
            context.fireChannelInactive()
        }

        /// Writes the next chunk once the last one has gone out, which flow control holds
        /// back until the client has taken enough of the body: so `flooded` counts what was
        /// sent, not what waits in a buffer. Each chunk is written from a job of its own, since
        /// a write that goes out at once completes at once.
        private func flood(_ context: ChannelHandlerContext) {
            guard let written = flooded, written < Self.floodLimit, context.channel.isActive else { return }
            let sent = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(Self.wrapOutboundOut(.data(.init(data: .byteBuffer(Self.floodChunk)))), promise: sent)
            sent.futureResult.assumeIsolated().whenSuccess {
                self.flooded = written + Self.floodChunk.readableBytes
                context.eventLoop.assumeIsolated().execute { self.flood(context) }
            }
        }
    }
}
