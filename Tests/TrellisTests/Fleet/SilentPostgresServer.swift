#if Postgres
import Foundation
import NIOCore
import NIOPosix
import PostgresNIO

/// A hostile PostgreSQL server on a Unix socket: it lets a client in (trust authentication),
/// answers its first `answered` statements as an empty success (which is how a `BEGIN` is
/// answered), and then never answers again, as a database that stopped mid-transaction, or a
/// statement postgres-nio dropped, looks to the client.
final class SilentPostgresServer: Sendable {
    let socket: String
    private let channel: any Channel

    init(answered: Int) async throws {
        socket = FileManager.default.temporaryDirectory.appending(path: "trellis-silent-\(UUID().uuidString.prefix(8)).sock").path
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Handler(answered: answered)) }
            }
            .bind(unixDomainSocketPath: socket, cleanupExistingSocketFile: true)
            .get()
    }

    /// Runs `body` with a server and a running client of it, then stops both.
    static func with(answered: Int, _ body: (PostgresClient) async throws -> Void) async throws {
        let server = try await SilentPostgresServer(answered: answered)
        do {
            try await PostgresServer.running(PostgresClient(configuration: PostgresServer.configuration(socket: server.socket)), body)
        } catch {
            try? await server.channel.close()
            throw error
        }
        try await server.channel.close()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private var buffered = ByteBuffer()
        private var started = false
        private var answered: Int

        init(answered: Int) {
            self.answered = answered
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            buffered.writeBuffer(&bytes)
            while let message = nextMessage() {
                if message == nil {
                    // The startup message: in, with no password, a key to cancel with (which
                    // postgres-nio requires), and ready.
                    var reply = context.channel.allocator.buffer(capacity: 28)
                    reply.writeInteger(UInt8(ascii: "R")); reply.writeInteger(Int32(8)); reply.writeInteger(Int32(0))
                    reply.writeInteger(UInt8(ascii: "K")); reply.writeInteger(Int32(12)); reply.writeInteger(Int32(1)); reply.writeInteger(Int32(2))
                    reply.writeInteger(UInt8(ascii: "Z")); reply.writeInteger(Int32(5)); reply.writeInteger(UInt8(ascii: "I"))
                    context.writeAndFlush(wrapOutboundOut(reply), promise: nil)
                } else if message == UInt8(ascii: "S"), answered > 0 {
                    // A statement's Sync (postgres-nio sends Parse, Describe, Bind, Execute,
                    // Sync): parsed, no parameters, no rows, bound, done, in a transaction.
                    answered -= 1
                    var reply = context.channel.allocator.buffer(capacity: 40)
                    reply.writeInteger(UInt8(ascii: "1")); reply.writeInteger(Int32(4))
                    reply.writeInteger(UInt8(ascii: "t")); reply.writeInteger(Int32(6)); reply.writeInteger(Int16(0))
                    reply.writeInteger(UInt8(ascii: "n")); reply.writeInteger(Int32(4))
                    reply.writeInteger(UInt8(ascii: "2")); reply.writeInteger(Int32(4))
                    reply.writeInteger(UInt8(ascii: "C")); reply.writeInteger(Int32(4 + 6)); reply.writeString("BEGIN"); reply.writeInteger(UInt8(0))
                    reply.writeInteger(UInt8(ascii: "Z")); reply.writeInteger(Int32(5)); reply.writeInteger(UInt8(ascii: "T"))
                    context.writeAndFlush(wrapOutboundOut(reply), promise: nil)
                }
            }
        }

        /// The next whole message's type (`nil` inside for the startup message, which has
        /// none), or `nil` when no whole message is buffered.
        private func nextMessage() -> UInt8?? {
            if !started {
                guard let length = buffered.getInteger(at: buffered.readerIndex, as: Int32.self), buffered.readableBytes >= Int(length) else { return nil }
                buffered.moveReaderIndex(forwardBy: Int(length))
                started = true
                return .some(nil)
            }
            guard let type = buffered.getInteger(at: buffered.readerIndex, as: UInt8.self),
                let length = buffered.getInteger(at: buffered.readerIndex + 1, as: Int32.self),
                buffered.readableBytes >= 1 + Int(length)
            else { return nil }
            buffered.moveReaderIndex(forwardBy: 1 + Int(length))
            return .some(type)
        }
    }
}
#endif
