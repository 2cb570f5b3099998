import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP server on an address other than loopback that keeps every byte it is sent, for the
/// tests of what must never reach it: it answers each HTTP request head it reads with a `200`,
/// and counts its connections (a SOCKS5 greeting, which it never answers, counts too).
final class TrapServer: StoppableTestServer {
    private struct Caught {
        var connections = 0
        var bytes: [UInt8] = []
    }

    private let channel: any Channel
    private let caught = NIOLockedValueBox(Caught())

    /// The address it listens on.
    let address: String
    var port: Int { channel.localAddress!.port! }
    /// How many connections it accepted.
    var connections: Int { caught.withLockedValue { $0.connections } }
    /// What it was sent, as text.
    var received: String { String(decoding: caught.withLockedValue { $0.bytes }, as: UTF8.self) }

    /// A server on `address`, a port the system picks.
    init(on address: String) async throws {
        self.address = address
        let caught = self.caught
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                caught.withLockedValue { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Handler(caught: caught)) }
            }
            .bind(host: address, port: 0)
            .get()
    }

    /// Runs `body` with a trap on the first address of this machine that is not a loopback one,
    /// or with `nil` when the machine has none (then a test can still check that a call is
    /// refused before it connects, to an address that reaches nothing).
    static func offLoopback<Result: Sendable>(_ body: (TrapServer?) async throws -> Result) async throws -> Result {
        let address = try System.enumerateDevices().compactMap { device -> String? in
            guard case .v4 = device.address, let ip = device.address?.ipAddress, !ip.hasPrefix("127.") else { return nil }
            return ip
        }.first
        guard let address else { return try await body(nil) }
        return try await running({ try await TrapServer(on: address) }, body)
    }

    func stop() async throws {
        try await channel.close()
    }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private let caught: NIOLockedValueBox<Caught>

        init(caught: NIOLockedValueBox<Caught>) {
            self.caught = caught
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = Self.unwrapInboundIn(data)
            let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
            let answers = caught.withLockedValue { caught in
                caught.bytes += bytes
                return String(decoding: bytes, as: UTF8.self).contains("\r\n\r\n")
            }
            if answers {
                context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")), promise: nil)
            }
        }
    }
}
