import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import Trellis
import TrellisTesting

/// What every ``Transport`` must do with the ``ExchangeLimits`` it is given, and how it reports
/// what goes wrong: the same cases against AsyncHTTPClient, URLSession and `MockTransport`.
/// Each test calls `transport.send(_:within:)` itself, with no client around it, so a transport
/// that leaves a limit to someone else fails here.
///
/// A transport of your own passes these cases when it is added to ``ConformingTransport``; the
/// article "Writing a middleware or a transport" says so.
@Suite("The transport contract")
struct TransportConformanceTests {
    @Test(.hangGuard, arguments: ConformingTransport.allCases)
    func anAnswerComesBackWithItsHeadAndBody(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            let buffered = try await subject.transport.send(subject.request("/record"), within: .buffered(upTo: 1 << 20))
            #expect(buffered.status == .ok)
            // A buffered exchange hands its body over in memory.
            guard case .bytes(let bytes) = buffered.body.storage else {
                Issue.record("a buffered exchange returned a streamed body")
                return
            }
            #expect(String(buffer: bytes) == "ok")
            let streamed = try await subject.transport.send(subject.request("/record"), within: .streamed())
            #expect(String(buffer: try await streamed.body.collect(upTo: 1 << 20)) == "ok")
        }
    }

    @Test(.hangGuard, arguments: ConformingTransport.allCases)
    func aBufferedBodyPastTheLimitIsRefused(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            let error = await #expect(throws: TrellisError.self) {
                _ = try await subject.transport.send(subject.request("/flood"), within: .buffered(upTo: 1 << 20))
            }
            guard case .responseTooLarge(let failure) = error else {
                Issue.record("expected responseTooLarge, got \(String(describing: error))")
                return
            }
            #expect(failure.limit == 1 << 20)
        }
    }

    @Test(.hangGuard, arguments: ConformingTransport.allCases)
    func aBodyAnnouncedPastTheLimitIsRefusedWithoutWaitingForIt(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            // The body announces 1000 bytes, sends 10 and stalls: only its announced length can
            // end the exchange before the (long) deadline.
            let error = await #expect(throws: TrellisError.self) {
                _ = try await subject.transport.send(subject.request("/stall-body"), within: .buffered(upTo: 100, timeout: .seconds(300)))
            }
            guard case .responseTooLarge(let failure) = error else {
                Issue.record("expected responseTooLarge, got \(String(describing: error))")
                return
            }
            #expect(failure.announcedLength == 1000)
        }
    }

    @Test(.hangGuard, arguments: ConformingTransport.allCases)
    func theHeadIsHeldToTheDeadline(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            let error = await #expect(throws: TrellisError.self) {
                _ = try await subject.transport.send(subject.request("/silent"), within: .streamed(timeout: .milliseconds(300)))
            }
            guard case .timedOut(let failure) = error else {
                Issue.record("expected timedOut, got \(String(describing: error))")
                return
            }
            #expect(failure.timeout == .milliseconds(300))
            #expect(failure.waitingFor == nil)
        }
    }

    @Test(.hangGuard, arguments: ConformingTransport.allCases)
    func aBufferedBodyIsHeldToTheDeadline(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            let error = await #expect(throws: TrellisError.self) {
                _ = try await subject.transport.send(subject.request("/stall-body"), within: .buffered(upTo: 1 << 20, timeout: .milliseconds(300)))
            }
            guard case .timedOut(let failure) = error else {
                Issue.record("expected timedOut, got \(String(describing: error))")
                return
            }
            #expect(failure.timeout == .milliseconds(300))
        }
    }

    @Test(.hangGuard, arguments: ConformingTransport.allCases)
    func aStreamedBodyIsHeldToTheIdleTimeoutNotTheDeadline(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            // The deadline is for the head; the body that stalls after it is ended by the idle
            // timeout.
            let limits = ExchangeLimits(timeout: .seconds(300), idleTimeout: .milliseconds(300))
            let response = try await subject.transport.send(subject.request("/stall-body"), within: limits)
            #expect(response.status == .ok)
            var received = 0
            let error = await #expect(throws: TrellisError.self) {
                for try await chunk in response.body { received += chunk.readableBytes }
            }
            guard case .timedOut(let failure) = error else {
                Issue.record("expected timedOut, got \(String(describing: error))")
                return
            }
            #expect(failure.timeout == .milliseconds(300))
            #expect(failure.waitingFor == "the next byte of the body")
            #expect(received == 10)
        }
    }

    @Test(.hangGuard, arguments: ConformingTransport.allCases)
    func cancellingTheCallerEndsTheExchangeWithCancellationError(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            var arrivals = subject.arrivals.makeAsyncIterator()
            let call = Task {
                try await subject.transport.send(subject.request("/silent"), within: .streamed(timeout: .seconds(300)))
            }
            // Cancelled once the request is out, waiting for a head that never comes.
            #expect(await arrivals.next()?.contains("/silent") == true)
            call.cancel()
            await #expect(throws: CancellationError.self) { _ = try await call.value }
        }
    }

    /// A transport that pools connections reports a request that broke on a connection the
    /// server had closed, before any of an answer, as such (the client then sends it once
    /// more), or sends it again itself; it never fails it as an ordinary broken connection.
    @Test(.hangGuard, arguments: ConformingTransport.allCases.filter(\.hasConnections))
    func aPooledConnectionTheServerClosedIsReportedAsStale(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            let first = try await subject.transport.send(subject.request("/once-per-connection"), within: .buffered(upTo: 1 << 20))
            #expect(first.status == .ok)
            do {
                let second = try await subject.transport.send(subject.request("/once-per-connection"), within: .buffered(upTo: 1 << 20))
                #expect(second.status == .ok)
            } catch TrellisError.connectionFailed(let failure) {
                #expect(failure.mayBeStaleConnection, "\(failure)")
            }
        }
    }

    /// The network's failures come back as ``TrellisError`` values that say what happened.
    @Test(.hangGuard, arguments: ConformingTransport.allCases.filter(\.hasConnections))
    func theNetworksFailuresAreNamed(_ kind: ConformingTransport) async throws {
        try await kind.with { subject in
            let notHTTP = await #expect(throws: TrellisError.self) {
                _ = try await subject.transport.send(subject.request("/not-http"), within: .buffered(upTo: 1 << 20, timeout: .seconds(300)))
            }
            guard case .connectionFailed(let malformed) = notHTTP else {
                Issue.record("expected connectionFailed, got \(String(describing: notHTTP))")
                return
            }
            #expect(malformed.isProtocolViolation, "\(malformed)")
            #expect(!malformed.mayBeStaleConnection, "\(malformed)")

            let cut = await #expect(throws: TrellisError.self) {
                _ = try await subject.transport.send(subject.request("/cut-short"), within: .buffered(upTo: 1 << 20, timeout: .seconds(300)))
            }
            guard case .connectionFailed(let broken) = cut else {
                Issue.record("expected connectionFailed, got \(String(describing: cut))")
                return
            }
            #expect(!broken.isProtocolViolation, "a cut is not a malformed answer: \(broken)")
        }
        // Nothing listens on a port just let go of.
        let closed = try await ScriptedServer.with({ _ in "" }) { $0.url }
        let refused = await #expect(throws: TrellisError.self) {
            _ = try await kind.transport.send(try Request(method: .get, url: closed.appending(path: "x")), within: .buffered(upTo: 1 << 20))
        }
        guard case .connectionFailed(let failure) = refused else {
            Issue.record("expected connectionFailed, got \(String(describing: refused))")
            return
        }
        #expect(failure.host.contains("127.0.0.1"), "\(failure)")
    }
}

extension ExchangeLimits {
    /// A buffered exchange of at most `limit` bytes.
    static func buffered(upTo limit: Int, timeout: Duration = .seconds(60)) -> ExchangeLimits {
        ExchangeLimits(timeout: timeout, idleTimeout: .seconds(60), bufferLimit: limit)
    }

    /// A streamed exchange.
    static func streamed(timeout: Duration = .seconds(60)) -> ExchangeLimits {
        ExchangeLimits(timeout: timeout, idleTimeout: .seconds(60))
    }
}

/// A transport under the contract's tests, with what answers it: ``HostileServer`` for a
/// network transport, registrations that behave alike for `MockTransport`. The paths are
/// `HostileServer`'s: `/record` answers "ok", `/silent` never answers, `/stall-body` announces
/// 1000 bytes and stalls after 10, `/flood` never ends.
enum ConformingTransport: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case asyncHTTPClient
    case urlSession
    case mock

    var testDescription: String { rawValue }

    /// Whether the transport keeps connections, which can go stale and break.
    var hasConnections: Bool { self != .mock }

    /// The network transports, as the integration tests make them.
    var transport: any Transport {
        switch self {
        case .asyncHTTPClient: TransportKind.asyncHTTPClient.transport
        case .urlSession: TransportKind.urlSession.transport
        case .mock: MockTransport()
        }
    }

    struct Subject: Sendable {
        let transport: any Transport
        let base: URL
        /// Yields the request line of each request as it arrives.
        let arrivals: AsyncStream<String>

        func request(_ path: String) throws -> Request {
            try Request(method: .get, url: base.appending(path: path))
        }
    }

    func with(_ body: (Subject) async throws -> Void) async throws {
        guard self == .mock else {
            try await HostileServer.with { server in
                try await body(Subject(transport: transport, base: server.url, arrivals: server.arrivals))
            }
            return
        }
        let (arrivals, arrivalSink) = AsyncStream.makeStream(of: String.self)
        let stalls = Stalls()
        defer { stalls.end() }
        let mock = MockTransport()
        let arrived: @Sendable (MockTransport.RecordedRequest) -> Void = { arrivalSink.yield("GET \($0.path) HTTP/1.1") }
        mock.register(.get, "/record") { request in
            arrived(request)
            return Response(head: HTTPResponse(status: .ok), body: Data("ok".utf8))
        }
        mock.register(.get, "/silent", streaming: { request in
            arrived(request)
            for await _ in stalls.stream() {}
            throw CancellationError()
        })
        mock.register(.get, "/stall-body", streaming: { request in
            arrived(request)
            let chunks = stalls.stream(first: ByteBuffer(string: "0123456789"))
            return Response(
                head: HTTPResponse(status: .ok, headerFields: [.contentLength: "1000"]),
                body: ResponseBody(stream: chunks, expectedLength: 1000)
            )
        })
        mock.register(.get, "/flood", streaming: { request in
            arrived(request)
            let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 * 1024)
            return Response(head: HTTPResponse(status: .ok), body: ResponseBody(stream: AsyncStream(unfolding: { chunk }), expectedLength: nil))
        })
        try await body(Subject(transport: mock, base: URL(string: "https://api.test")!, arrivals: arrivals))
    }
}

/// Streams that stall: each yields what it is given first, then nothing until the test ends
/// (or its reader is cancelled).
private final class Stalls: Sendable {
    private let open = NIOLockedValueBox<[AsyncStream<ByteBuffer>.Continuation]>([])

    func stream(first: ByteBuffer? = nil) -> AsyncStream<ByteBuffer> {
        let (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
        if let first { continuation.yield(first) }
        open.withLockedValue { $0.append(continuation) }
        return stream
    }

    func end() {
        for continuation in open.withLockedValue({ $0 }) { continuation.finish() }
    }
}
