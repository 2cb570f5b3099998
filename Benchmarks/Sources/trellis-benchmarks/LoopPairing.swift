import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTPTypes
import NIOPosix
import Trellis

/// `TRELLIS_BENCH_PAIRING=1`: for each connection to the in-process server, the event loop of
/// its client end and of its server end, and how many requests each side sent on it, printed
/// after the rounds of `TRELLIS_BENCH_PROFILE`. With the server on the process's shared loops,
/// both ends of a connection can be on one thread, which no server in another process shares.
///
/// The client end is seen by a connection initializer of the transport that both sides of a
/// suite then use (in place of `AsyncHTTPClientTransport.shared`); the server end by a handler
/// after Hummingbird's HTTP decoder. Trellis's requests are told from raw ones by their
/// `Accept-Encoding`, which only Trellis sends here.
final class LoopPairing: Sendable {
    /// The recorder, when `TRELLIS_BENCH_PAIRING` is set.
    static let shared: LoopPairing? = ProcessInfo.processInfo.environment["TRELLIS_BENCH_PAIRING"] != nil ? LoopPairing() : nil

    private struct Connection {
        var clientLoop = "?"
        var serverLoop = "?"
        var raw = 0
        var trellis = 0
    }

    /// By the client end's port.
    private let connections: NIOLockedValueBox<[Int: Connection]>
    private let sharedLoops: [ObjectIdentifier]
    /// The transport whose connections are watched.
    let transport: Trellis.AsyncHTTPClientTransport

    private init() {
        let connections = NIOLockedValueBox([Int: Connection]())
        let sharedLoops = MultiThreadedEventLoopGroup.singleton.makeIterator().map(ObjectIdentifier.init)
        var configuration = Trellis.AsyncHTTPClientTransport.defaultConfiguration
        configuration.http1_1ConnectionDebugInitializer = { channel in
            if let port = channel.localAddress?.port {
                let loop = Self.name(channel.eventLoop, among: sharedLoops)
                connections.withLockedValue { $0[port, default: Connection()].clientLoop = loop }
            }
            return channel.eventLoop.makeSucceededVoidFuture()
        }
        self.connections = connections
        self.sharedLoops = sharedLoops
        self.transport = Trellis.AsyncHTTPClientTransport(configuration: configuration)
    }

    private static func name(_ loop: any EventLoop, among sharedLoops: [ObjectIdentifier]) -> String {
        sharedLoops.firstIndex(of: ObjectIdentifier(loop)).map { "shared \($0)" } ?? "server's own"
    }

    /// Forgets the requests counted so far, keeping the connections.
    func resetCounts() {
        connections.withLockedValue { connections in
            for port in connections.keys {
                connections[port]?.raw = 0
                connections[port]?.trellis = 0
            }
        }
    }

    /// Each connection that carried requests, busiest first, then each side's share of
    /// requests sent on connections whose two ends were on one loop.
    func report() -> String {
        let rows = connections.withLockedValue { $0 }.filter { $0.value.raw + $0.value.trellis > 0 }
            .sorted { $0.value.raw + $0.value.trellis > $1.value.raw + $1.value.trellis }
        let lines = rows.map { port, connection in
            "port \(port): client on \(connection.clientLoop), server on \(connection.serverLoop); requests raw \(connection.raw), Trellis \(connection.trellis)"
        }
        func share(_ count: KeyPath<Connection, Int>) -> String {
            let all = rows.reduce(0) { $0 + $1.value[keyPath: count] }
            let together = rows.filter { $0.value.clientLoop == $0.value.serverLoop }.reduce(0) { $0 + $1.value[keyPath: count] }
            return all == 0 ? "-" : String(format: "%.0f%%", 100 * Double(together) / Double(all))
        }
        return (lines + ["both ends on one loop: raw \(share(\.raw)) of its requests, Trellis \(share(\.trellis))"]).joined(separator: "\n")
    }

    private func served(_ head: HTTPRequest, clientPort: Int, on loop: any EventLoop) {
        let trellis = head.headerFields[.acceptEncoding] != nil
        let loop = Self.name(loop, among: sharedLoops)
        connections.withLockedValue { connections in
            connections[clientPort, default: Connection()].serverLoop = loop
            if trellis { connections[clientPort]?.trellis += 1 } else { connections[clientPort]?.raw += 1 }
        }
    }

    /// A handler for the server end of a new connection.
    func serverHandler() -> any RemovableChannelHandler {
        ServerSide(pairing: self)
    }

    private final class ServerSide: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart

        let pairing: LoopPairing

        init(pairing: LoopPairing) {
            self.pairing = pairing
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .head(let head) = unwrapInboundIn(data), let port = context.channel.remoteAddress?.port {
                pairing.served(head, clientPort: port, on: context.eventLoop)
            }
            context.fireChannelRead(data)
        }
    }
}
