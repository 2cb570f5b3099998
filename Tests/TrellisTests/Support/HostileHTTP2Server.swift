import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A TLS server that speaks HTTP/2 alone (ALPN `h2`), for faults that only HTTP/2 can carry
/// to AsyncHTTPClient. It answers each stream by its `:path`:
///
/// - `/status-000`: `:status` 000, then `ok` as a body of 2 bytes.
/// - `/status-negative`: `:status` -5, then the same.
/// - anything else: 200 with `ok`.
///
/// Its certificate is for `localhost`, from ``certificates``' authority.
final class HostileHTTP2Server: RawTestServer {
    let certificates: TestCertificates
    private let channel: any Channel
    private let paths = NIOLockedValueBox<[String]>([])

    var url: URL { URL(string: "https://localhost:\(channel.localAddress!.port!)")! }
    /// The `:path` of every stream opened, in order.
    var requestedPaths: [String] { paths.withLockedValue { $0 } }

    init() async throws {
        let certificates = try TestCertificates()
        self.certificates = certificates
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
                    channel.configureHTTP2Pipeline(mode: .server, inboundStreamInitializer: { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(StreamHandler(paths: paths))
                        }
                    }).map { _ in }
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func stop() async throws {
        try await channel.close()
    }

    private final class StreamHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTP2Frame.FramePayload
        typealias OutboundOut = HTTP2Frame.FramePayload

        let paths: NIOLockedValueBox<[String]>

        init(paths: NIOLockedValueBox<[String]>) {
            self.paths = paths
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .headers(let request) = Self.unwrapInboundIn(data) else { return }
            let path = request.headers.first(name: ":path") ?? ""
            paths.withLockedValue { $0.append(path) }
            let status = ["/status-000": "000", "/status-negative": "-5"][path] ?? "200"
            let head = HPACKHeaders([(":status", status), ("content-length", "2")])
            context.write(Self.wrapOutboundOut(.headers(.init(headers: head))), promise: nil)
            let body = HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(ByteBuffer(string: "ok")), endStream: true))
            context.writeAndFlush(Self.wrapOutboundOut(body), promise: nil)
        }
    }
}
