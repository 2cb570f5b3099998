import Foundation
public import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
public import Trellis

/// A ``Transport`` wrapper that injects the faults of a real network into the exchanges of
/// another, by script or by seeded chance, so that a test of your retry and timeout handling
/// is repeatable, over either built-in transport or any other.
///
/// ```swift
/// let faulty = FaultInjectingTransport(
///     wrapping: AsyncHTTPClientTransport.shared,
///     plan: .script([.status(.serviceUnavailable, retryAfter: 1), .dropBeforeResponse])
/// )
/// let client = Client(baseURL: serverURL, transport: faulty) { $0.retry = .standard }
/// let post = try await BlogService(client: client).post(id: 7)   // the third attempt answers
/// #expect(faulty.injected.map(\.fault) == [.status(.serviceUnavailable, retryAfter: 1), .dropBeforeResponse])
/// ```
///
/// A fault is what the client would see from the network, not a mock of it: a dropped
/// connection is a ``TrellisError/connectionFailed(_:)``, a stalled body runs into the idle
/// timeout or the deadline, a corrupt compressed body fails where the client decodes it. The
/// request still reaches the server, except for ``Fault/status(_:retryAfter:)``, which answers
/// in its place.
public final class FaultInjectingTransport: Transport {
    /// A fault of the network.
    public enum Fault: Sendable, Hashable, CustomStringConvertible {
        /// The exchange starts this much later (counted against the attempt's deadline).
        case latency(Duration)
        /// The response's body stops after this many bytes and never goes on: the idle
        /// timeout of a streamed body ends it, or the deadline of a buffered one.
        case stallBody(afterBytes: Int)
        /// The request is sent and the connection drops before the response's head.
        case dropBeforeResponse
        /// The connection drops after this many bytes of the response's body.
        case dropDuringResponse(afterBytes: Int)
        /// The request is answered with `status` in place of the server, with `Retry-After`
        /// in seconds when given.
        case status(HTTPResponse.Status, retryAfter: Int? = nil)
        /// The response's compressed body (`Content-Encoding`) is corrupted; a body sent
        /// uncompressed is left as it is. Over a transport that decodes bodies itself
        /// (URLSession), the body fails as a corrupt one fails there.
        case corruptCompressedBody

        public var description: String {
            switch self {
            case .latency(let duration): "latency of \(duration)"
            case .stallBody(let bytes): "a body stalled after \(bytes) bytes"
            case .dropBeforeResponse: "a connection dropped before the response"
            case .dropDuringResponse(let bytes): "a connection dropped after \(bytes) bytes of the body"
            case .status(let status, let retryAfter): "\(status.code) \(status.reasonPhrase)" + (retryAfter.map { " (Retry-After: \($0))" } ?? "")
            case .corruptCompressedBody: "a corrupt compressed body"
            }
        }
    }

    /// A fault with the chance of its happening to a request, from 0 to 1.
    public struct Chance: Sendable, Hashable {
        /// The fault.
        public var fault: Fault
        /// Its chance per request.
        public var probability: Double

        /// `fault` with `probability` per request.
        public init(_ fault: Fault, probability: Double) {
            self.fault = fault
            self.probability = probability
        }
    }

    /// Which requests meet which faults.
    public enum Plan: Sendable {
        /// The n-th request to reach the transport meets the n-th fault (`nil`: none), and the
        /// requests after the script's end meet none.
        case script([Fault?])
        /// Each request meets at most one of `chances`, drawn from a generator seeded with
        /// `seed`, the request's method, path and query (not its host and port, so that a test
        /// server on a new port each run meets the same faults), and how many such requests
        /// came before it: with the same seed, the n-th request for a path meets the same fault
        /// in every run, whatever the requests for other paths do in between. The chances are
        /// tried in order and should not add up to more than 1.
        case seeded(UInt64, [Chance])
    }

    /// A fault the transport injected.
    public struct InjectedFault: Sendable, Hashable {
        /// The request it met: its method and URL (with no query values redacted; the test's
        /// own).
        public let request: String
        /// The fault.
        public let fault: Fault
    }

    private let wrapped: any Transport
    private let plan: Plan
    private struct State {
        var sent = 0
        var occurrences: [String: UInt64] = [:]
        var injected: [InjectedFault] = []
    }
    private let state = NIOLockedValueBox(State())

    /// A wrapper of `transport` that injects the faults of `plan`.
    public init(wrapping transport: any Transport, plan: Plan) {
        self.wrapped = transport
        self.plan = plan
    }

    /// The faults injected so far, in the order the requests met them.
    public var injected: [InjectedFault] {
        state.withLockedValue { $0.injected }
    }

    public var decodesContentEncoding: Bool { wrapped.decodesContentEncoding }

    public func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        guard let fault = nextFault(for: request) else { return try await wrapped.send(request, within: limits) }
        let host = request.head.authority ?? ""
        switch fault {
        case .latency(let duration):
            return try await limits.enforce(for: request) {
                try await Task.sleep(for: duration)
                return try await self.wrapped.send(request, within: limits)
            }
        case .status(let status, let retryAfter):
            var fields: HTTPFields = [.contentType: "text/plain; charset=utf-8"]
            if let retryAfter { fields[.retryAfter] = String(retryAfter) }
            return Response(head: HTTPResponse(status: status, headerFields: fields), body: ResponseBody("FaultInjectingTransport: \(fault)"))
        case .dropBeforeResponse:
            _ = try await wrapped.send(request, within: limits)
            throw Self.dropped(host, fault)
        case .dropDuringResponse(let bytes):
            let response = try await wrapped.send(request, within: limits)
            return try await Self.cut(response, after: bytes, limits: limits, request: request) { throw Self.dropped(host, fault) }
        case .stallBody(let bytes):
            let response = try await wrapped.send(request, within: limits)
            return try await Self.cut(response, after: bytes, limits: limits, request: request) {
                while true { try await Task.sleep(for: .seconds(3600)) }
            }
        case .corruptCompressedBody:
            let response = try await wrapped.send(request, within: limits)
            guard let coding = response.headerFields[.contentEncoding], coding.lowercased() != "identity" else { return response }
            if wrapped.decodesContentEncoding {
                return try await Self.cut(response, after: 0, limits: limits, request: request) {
                    throw TrellisError.connectionFailed(ConnectionFailure(
                        host: host,
                        reason: "the compressed body is not valid (\(coding) corrupted by FaultInjectingTransport)"
                    ))
                }
            }
            return response.withBody(Self.corrupted(response.body))
        }
    }

    /// The fault for the next request under the plan, recorded; `nil` for none.
    private func nextFault(for request: Request) -> Fault? {
        let key = "\(request.method) \(request.head.path ?? "/")"
        return state.withLockedValue { state -> Fault? in
            let fault: Fault?
            switch plan {
            case .script(let faults):
                fault = state.sent < faults.count ? faults[state.sent] : nil
            case .seeded(let seed, let chances):
                let occurrence = state.occurrences[key, default: 0]
                state.occurrences[key] = occurrence + 1
                var generator = SeededGenerator(seed: seed ^ Self.stableHash(key) ^ (occurrence &* 0x9E37_79B9_7F4A_7C15))
                let draw = Double(generator.next() >> 11) / Double(1 << 53)
                var total = 0.0
                fault = chances.first { chance in
                    total += chance.probability
                    return draw < total
                }?.fault
            }
            state.sent += 1
            if let fault { state.injected.append(InjectedFault(request: "\(request.method) \(request.urlString)", fault: fault)) }
            return fault
        }
    }

    private static func dropped(_ host: String, _ fault: Fault) -> TrellisError {
        .connectionFailed(ConnectionFailure(host: host, reason: "the connection closed: \(fault), injected by FaultInjectingTransport"))
    }

    /// `response` with its body handed over up to `bytes`, then `end` (which throws, or waits
    /// until cancelled), held to `limits` as a network body is.
    private static func cut(
        _ response: Response<ResponseBody>,
        after bytes: Int,
        limits: ExchangeLimits,
        request: Request,
        then end: @escaping @Sendable () async throws -> Void
    ) async throws -> Response<ResponseBody> {
        let body = response.body
        let cutBody = ResponseBody(expectedLength: body.expectedLength) {
            var chunks = body.makeAsyncIterator()
            var remaining = bytes
            return ChunkIterator {
                if remaining > 0, var chunk = try await chunks.next() {
                    let part = chunk.readSlice(length: min(remaining, chunk.readableBytes))!
                    remaining -= part.readableBytes
                    return part
                }
                try await end()
                return nil
            }
        }
        let cutResponse = response.withBody(cutBody)
        // A buffered exchange's body must be in memory by the deadline: collecting it here
        // meets the stall or the drop where the network transport would have.
        guard limits.bufferLimit != nil else { return limits.watchingIdleTime(cutResponse, of: request) }
        return try await limits.enforce(for: request) { cutResponse }
    }

    /// `body` with every byte after the first two (the magic number of gzip, the header of
    /// zlib) inverted as it is read, which no decoder accepts.
    private static func corrupted(_ body: ResponseBody) -> ResponseBody {
        ResponseBody(expectedLength: body.expectedLength) {
            var chunks = body.makeAsyncIterator()
            var offset = 0
            return ChunkIterator {
                guard let chunk = try await chunks.next() else { return nil }
                var bytes = Array(chunk.readableBytesView)
                for index in bytes.indices where offset + index >= 2 { bytes[index] ^= 0xFF }
                offset += bytes.count
                return ByteBuffer(bytes: bytes)
            }
        }
    }

    /// FNV-1a: the same number for the same text in every process (Swift's `Hasher` is
    /// seeded afresh each run).
    private static func stableHash(_ text: String) -> UInt64 {
        text.utf8.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
    }
}

/// SplitMix64: a small generator whose sequence depends on its seed alone.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
