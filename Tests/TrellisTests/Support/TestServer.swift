import Foundation
import Hummingbird
import HummingbirdTLS
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle

/// An in-process Hummingbird server on 127.0.0.1 with a port chosen by the system.
enum TestServer {
    /// Runs `body` with the base URL of a server built by `configure`, then stops the server.
    ///
    /// - Parameter tls: serves HTTPS with this configuration, at `https://localhost:<port>`
    ///   (the name test certificates are made for); plain HTTP at `http://127.0.0.1:<port>`
    ///   when `nil`.
    static func with<Result: Sendable>(
        tls: TLSConfiguration? = nil,
        _ configure: (Router<BasicRequestContext>) -> Void,
        _ body: (URL) async throws -> Result
    ) async throws -> Result {
        let router = Router()
        configure(router)
        return try await run({ onServerRunning, logger in
            Application(
                router: router,
                server: try tls.map { try .tls(.http1(), tlsConfiguration: $0) } ?? .http1(),
                configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: onServerRunning,
                logger: logger
            )
        }) { port in
            try await body(URL(string: tls == nil ? "http://127.0.0.1:\(port)" : "https://localhost:\(port)")!)
        }
    }

    /// Runs the application `make` builds (on 127.0.0.1, port 0, reporting through
    /// `onServerRunning`), calls `body` with its port, then stops it.
    static func run<App: ApplicationProtocol, Result: Sendable>(
        _ make: (_ onServerRunning: @escaping @Sendable (any Channel) async -> Void, _ logger: Logger) throws -> App,
        _ body: (Int) async throws -> Result
    ) async throws -> Result {
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "test-server")
        logger.logLevel = .critical
        let app = try make({ channel in portSink.yield(channel.localAddress?.port ?? 0) }, logger)
        // Stopped gracefully, not cancelled: cancelling drops the connections the server has
        // accepted but not yet handed to its loop, and SwiftNIO traps on such a connection
        // ("Deinited NIOAsyncWriter without calling finish()"), which a slow machine met when
        // a client's connection arrived as its test ended. A graceful stop closes the
        // listener, handles what it accepted, and lets answers in flight end; what is still
        // running after a few seconds (a route that never ends) is cancelled.
        var configuration = ServiceGroupConfiguration(services: [app], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(5)
        let services = ServiceGroup(configuration: configuration)
        let server = Task { try await services.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CancellationError() }
        do {
            let result = try await body(port)
            await services.triggerGracefulShutdown()
            _ = await server.result
            return result
        } catch {
            await services.triggerGracefulShutdown()
            _ = await server.result
            throw error
        }
    }
}

/// A raw TCP listener that reads requests and never answers, and reports when a client
/// closes its connection: what a server sees of a cancelled request.
final class SilentServer: Sendable {
    enum Event: Sendable, Equatable {
        case requestReceived
        case connectionClosed
    }

    let events: AsyncStream<Event>
    private let sink: AsyncStream<Event>.Continuation
    private let channel: any Channel

    var url: URL { URL(string: "http://127.0.0.1:\(channel.localAddress!.port!)")! }

    init() async throws {
        let (events, sink) = AsyncStream.makeStream(of: Event.self)
        self.events = events
        self.sink = sink
        channel = try await RawListener.bind { Handler(sink: sink) }
    }

    func stop() async throws {
        try await channel.close()
        sink.finish()
    }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let sink: AsyncStream<Event>.Continuation

        init(sink: AsyncStream<Event>.Continuation) {
            self.sink = sink
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = Self.unwrapInboundIn(data)
            if buffer.readableBytesView.contains(UInt8(ascii: "\n")) {
                sink.yield(.requestReceived)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            sink.yield(.connectionClosed)
        }
    }
}

/// A raw TCP listener on 127.0.0.1 with a port chosen by the system, for servers that must
/// misbehave in ways no HTTP framework will: each accepted connection gets the handler
/// `makeHandler` returns for it.
enum RawListener {
    static func bind<Handler: ChannelHandler & Sendable>(_ makeHandler: @escaping @Sendable () -> Handler) async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(makeHandler())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }
}

/// A server a test starts, uses and stops.
protocol StoppableTestServer: Sendable {
    func stop() async throws
}

extension StoppableTestServer {
    /// Runs `body` with the server `start` makes, and stops it afterwards, whether `body`
    /// threw or not.
    static func running<Result: Sendable>(_ start: () async throws -> Self, _ body: (Self) async throws -> Result) async throws -> Result {
        let server = try await start()
        do {
            let result = try await body(server)
            try await server.stop()
            return result
        } catch {
            try? await server.stop()
            throw error
        }
    }
}

/// A raw server of the fault tests, which a test starts, uses and stops.
protocol RawTestServer: StoppableTestServer {
    init() async throws
}

extension RawTestServer {
    /// Runs `body` with a started server, and stops it afterwards, whether `body` threw or not.
    static func with<Result: Sendable>(_ body: (Self) async throws -> Result) async throws -> Result {
        try await running({ try await Self() }, body)
    }
}
