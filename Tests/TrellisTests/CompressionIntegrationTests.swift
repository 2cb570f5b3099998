import CompressNIO
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Testing
import Trellis

/// Routes that answer compressed, and one that reads a compressed request body.
final class CompressedRoutes: Sendable {
    static let post = #"{"id":7,"title":"Compressed","body":"\#(String(repeating: "all work and no play ", count: 200))"}"#
    /// 64 MiB of zeros, gzipped: about 64 KB that inflate a thousandfold. Made once for the
    /// whole run: compressing 64 MiB in every test kept both cooperative threads busy long
    /// enough to starve a timing test running beside them.
    static let bombBytes: ByteBuffer = {
        var zeros = ByteBufferAllocator().buffer(capacity: 64 << 20)
        zeros.writeRepeatingByte(0, count: 64 << 20)
        return try! zeros.compress(with: .gzip())
    }()
    /// The bomb gzipped once more, also made once: under ThreadSanitizer, compressing it at each
    /// request held a cooperative thread long enough to starve other tests.
    static let doubleBombBytes: ByteBuffer = {
        var once = bombBytes
        return try! once.compress(with: .gzip())
    }()
    let bomb = CompressedRoutes.bombBytes
    let acceptEncodings = NIOLockedValueBox<[String]>([])
    /// How many requests `z/negotiated` answered.
    let negotiatedFetches = NIOLockedValueBox(0)

    init() throws {}

    static func compressed(_ text: String, _ algorithm: CompressionAlgorithm) throws -> ByteBuffer {
        var buffer = ByteBuffer(string: text)
        return try buffer.compress(with: algorithm)
    }

    func install(_ router: Router<BasicRequestContext>) {
        router.get("z/gzip") { request, _ in
            self.acceptEncodings.withLockedValue { $0.append(request.headers[.acceptEncoding] ?? "") }
            return Self.answer(try Self.compressed(Self.post, .gzip()), encoding: "gzip")
        }
        // A server that behaves: gzip only when asked, and `Vary` says so; fresh for a minute.
        router.get("z/negotiated") { request, _ in
            self.negotiatedFetches.withLockedValue { $0 += 1 }
            let gzip = request.headers[.acceptEncoding]?.contains("gzip") ?? false
            let body = gzip ? try Self.compressed(Self.post, .gzip()) : ByteBuffer(string: Self.post)
            var headers: HTTPFields = [
                .contentType: "application/json", .contentLength: String(body.readableBytes),
                .vary: "Accept-Encoding", .cacheControl: "max-age=60",
            ]
            if gzip { headers[.contentEncoding] = "gzip" }
            return Hummingbird.Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        router.get("z/deflate") { _, _ in Self.answer(try Self.compressed(Self.post, .zlib()), encoding: "deflate") }
        router.get("z/bomb") { _, _ in Self.answer(self.bomb, encoding: "gzip") }
        // The bomb gzipped once more: a coding Trellis does not decode, which libcurl does.
        router.get("z/double") { _, _ in Self.answer(Self.doubleBombBytes, encoding: "gzip, gzip") }
        router.get("z/cut") { _, _ in
            var whole = try Self.compressed(Self.post, .gzip())
            return Self.answer(whole.readSlice(length: whole.readableBytes / 2)!, encoding: "gzip")
        }
        router.get("z/corrupt") { _, _ in Self.answer(ByteBuffer(string: "this is not gzip at all"), encoding: "gzip") }
        router.post("z/upload-digest") { request, _ in
            var body = try await request.body.collect(upTo: 16 << 20)
            let inflated = request.headers[.contentEncoding] == "gzip" ? try body.decompress(with: .gzip()) : body
            return "\(inflated.readableBytes) \(inflated.withUnsafeReadableBytes { SHA256.hash(data: $0) }.map { String(format: "%02x", $0) }.joined())"
        }
        router.post("z/upload") { request, _ in
            var body = try await request.body.collect(upTo: 1 << 20)
            let encoding = request.headers[.contentEncoding] ?? "identity"
            let size = body.readableBytes
            let text = encoding == "gzip" ? String(buffer: try body.decompress(with: .gzip())) : String(buffer: body)
            return "\(encoding) \(size) \(text)"
        }
    }

    private static func answer(_ body: ByteBuffer, encoding: String) -> Hummingbird.Response {
        Hummingbird.Response(
            status: .ok,
            headers: [.contentType: "application/json", .contentEncoding: encoding, .contentLength: String(body.readableBytes)],
            body: .init(byteBuffer: body)
        )
    }
}

private struct CompressedPost: Decodable, Equatable {
    let id: Int
    let title: String
    let body: String
}

@Service
protocol CompressedUploads {
    @POST("/z/upload")
    @CompressedBody
    @Body("text")
    func upload(text: String) async throws -> String
}

@Suite("Compression: gzip and deflate on both transports")
struct CompressionIntegrationTests {
    private func get(_ url: URL, _ path: String) throws -> Trellis.Request {
        try Trellis.Request(method: .get, url: url.appending(path: path))
    }

    @Test(arguments: TransportKind.allCases)
    func gzipAndDeflateBodiesAreAskedForAndDecoded(_ kind: TransportKind) async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            for path in ["z/gzip", "z/deflate"] {
                let response = try await client.response(for: get(url, path), as: CompressedPost.self)
                #expect(response.body.id == 7, "\(path)")
                #expect(response.body.body.hasPrefix("all work and no play"), "\(path)")
                // The caller reads a decoded body, and its headers say so.
                #expect(response.headerFields[.contentEncoding] == nil, "\(path)")
            }
            #expect(routes.acceptEncodings.withLockedValue { $0 }.allSatisfy { $0.contains("gzip") })
        }
    }

    /// 64 KB that inflate to 64 MiB: stopped at the ratio limit (250 times), long before.
    @Test(arguments: TransportKind.allCases)
    func aCompressionBombStopsAtTheRatioLimit(_ kind: TransportKind) async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let error = await #expect(throws: TrellisError.self) { try await client.data(for: get(url, "z/bomb")) }
            guard case .responseTooLarge(let tooLarge) = error else {
                Issue.record("expected responseTooLarge, got \(String(describing: error))")
                return
            }
            #expect(tooLarge.subject.contains("decompressed"))
            #expect(tooLarge.limit < 64 << 20)

            // With the ratio raised, the decoded size still counts against the body limit.
            let limited = Client(baseURL: url, transport: kind.transport) {
                $0.compression.maximumRatio = 2000
                $0.limits.maximumBodySize = 8 << 20
            }
            let overLimit = await #expect(throws: TrellisError.self) { try await limited.data(for: get(url, "z/bomb")) }
            guard case .responseTooLarge(let bodyLimit) = overLimit else {
                Issue.record("expected responseTooLarge, got \(String(describing: overLimit))")
                return
            }
            #expect(bodyLimit.limit == 8 << 20)

            // With the ratio raised, the same body is read whole (it is within the body limit).
            let lenient = Client(baseURL: url, transport: kind.transport) {
                $0.compression.maximumRatio = 2000
                $0.limits.maximumBodySize = 65 << 20
            }
            let bombBytes = try await lenient.data(for: get(url, "z/bomb")).body.count
            #expect(bombBytes == 64 << 20)
        }
    }

    /// Trellis decodes gzip and deflate; URLSession on Linux decodes whatever libcurl knows
    /// (`gzip, gzip`, `br`, `zstd`), and the ratio guard must hold for that too.
    @Test(arguments: TransportKind.allCases)
    func aCodingOnlyTheTransportKnowsIsHeldToTheRatioLimit(_ kind: TransportKind) async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            switch kind {
            case .urlSession:
                let error = await #expect(throws: TrellisError.self) { try await client.data(for: get(url, "z/double")) }
                guard case .responseTooLarge(let tooLarge) = error else {
                    Issue.record("expected responseTooLarge, got \(String(describing: error))")
                    return
                }
                #expect(tooLarge.subject.contains("decompressed"))
            case .asyncHTTPClient:
                // Not decoded: the body as sent, its coding still named.
                let response = try await client.data(for: get(url, "z/double"))
                #expect(response.headerFields[.contentEncoding] == "gzip, gzip")
                #expect(response.body.count < 64 * 1024)
            }
        }
    }

    /// One cache shared by a client on each transport, against a server that gzips only when
    /// asked: URLSession hands over bytes it decoded, and the entry it stores says so, so the
    /// other client is served the same JSON from the cache, whichever wrote it.
    @Test(arguments: TransportKind.allCases)
    func aCacheSharedByBothTransportsServesWhatItsHeadSays(writer: TransportKind) async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            let cache = HTTPCache()
            let reader = TransportKind.allCases.first { $0 != writer }!
            let first = Client(baseURL: url, transport: writer.transport) { $0.cache = cache }
            let second = Client(baseURL: url, transport: reader.transport) { $0.cache = cache }
            let stored = try await first.value(for: get(url, "z/negotiated"), as: CompressedPost.self)
            #expect(stored.id == 7)
            let served = try await second.response(for: get(url, "z/negotiated"), as: CompressedPost.self)
            #expect(served.body.id == 7)
            #expect(served.body.body.hasPrefix("all work and no play"))
            #expect(served.headerFields[.contentEncoding] == nil)
            #expect(served.headerFields[.age] != nil, "served from the cache")
            #expect(routes.negotiatedFetches.withLockedValue { $0 } == 1)
        }
    }

    /// An entry whose head says gzip over bytes that are not gzip (stored by a client that did
    /// not say it had decoded them) is removed rather than served: the next call fetches.
    @Test func aStoredBodyThatIsNotInItsCodingIsNotServed() async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            let cache = HTTPCache()
            // URLSession's bytes, decoded, under the head the server sent: what a transport that
            // decodes and does not say so would leave in the cache.
            let lying = DecodingWithoutSaying(inner: TransportKind.urlSession.transport)
            let writer = Client(baseURL: url, transport: lying) { $0.cache = cache }
            _ = try? await writer.data(for: get(url, "z/negotiated"))
            let reader = Client(baseURL: url, transport: TransportKind.asyncHTTPClient.transport) { $0.cache = cache }
            let served = try await reader.value(for: get(url, "z/negotiated"), as: CompressedPost.self)
            #expect(served.id == 7)
            #expect(routes.negotiatedFetches.withLockedValue { $0 } == 2)
        }
    }

    /// A download asks for the bytes as sent (it resumes by offsets into them). A server that
    /// gzips them anyway: AsyncHTTPClient keeps the server's bytes; URLSession cannot help
    /// decoding them, so the download is refused, naming the coding.
    @Test(arguments: TransportKind.allCases)
    func aDownloadHoldsTheServersBytesOrIsRefused(_ kind: TransportKind) async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            switch kind {
            case .asyncHTTPClient:
                let file = try await client.download(for: get(url, "z/bomb"))
                let size = try FileManager.default.attributesOfItem(atPath: file.url.path)[.size] as? Int
                #expect(size == CompressedRoutes.bombBytes.readableBytes)
                try? FileManager.default.removeItem(at: file.url)
            case .urlSession:
                let error = await #expect(throws: TrellisError.self) { try await client.download(for: get(url, "z/bomb")) }
                #expect("\(String(describing: error))".contains("Content-Encoding gzip"))
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRequestBodyIsSentGzippedWhenAsked(_ kind: TransportKind) async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let text = String(repeating: "compress me ", count: 500)
            var request = try Trellis.Request(method: .post, url: url.appending(path: "z/upload"), body: Trellis.RequestBody(text))
            request.compressesBody = true
            let answer = String(decoding: try await client.data(for: request).body, as: UTF8.self)
            let parts = answer.split(separator: " ", maxSplits: 2)
            #expect(parts.first == "gzip")
            #expect((Int(parts[1]) ?? .max) < text.utf8.count / 10)
            #expect(parts.last.map(String.init) == text)

            request.compressesBody = false
            #expect(String(decoding: try await client.data(for: request).body, as: UTF8.self).hasPrefix("identity \(text.utf8.count) "))

            // An endpoint marked @CompressedBody sends its body gzipped.
            let uploaded = try await CompressedUploadsService(client: client).upload(text: text)
            #expect(uploaded.hasPrefix("gzip "))
            #expect(uploaded.hasSuffix(" " + text))
        }
    }

    /// A streamed body of bytes that do not compress, in many chunks, where gzip's output is
    /// largest: every byte arrives.
    @Test(arguments: TransportKind.allCases)
    func anIncompressibleStreamedBodyArrivesWhole(_ kind: TransportKind) async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            // Bytes that do not compress, made cheaply: SHA-256 of a counter, 32 bytes a time.
            var bytes: [UInt8] = []
            bytes.reserveCapacity(2 << 20)
            for counter in 0..<((2 << 20) / 32) {
                bytes += SHA256.hash(data: withUnsafeBytes(of: counter) { Data($0) })
            }
            let chunks = AsyncStream<ByteBuffer> { continuation in
                for start in stride(from: 0, to: bytes.count, by: 48 * 1024) {
                    continuation.yield(ByteBuffer(bytes: bytes[start..<min(start + 48 * 1024, bytes.count)]))
                }
                continuation.finish()
            }
            var request = try Trellis.Request(method: .post, url: url.appending(path: "z/upload-digest"), body: Trellis.RequestBody(stream: chunks))
            request.compressesBody = true
            let answer = String(decoding: try await Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }.data(for: request).body, as: UTF8.self)
            #expect(answer == "\(bytes.count) \(SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())")
        }
    }

    /// Trellis decodes over AsyncHTTPClient, so it also judges what it decodes.
    @Test func aCutOrCorruptBodyFailsAndACallersOwnAcceptEncodingGetsTheBytesAsSent() async throws {
        let routes = try CompressedRoutes()
        try await TestServer.with(routes.install) { url in
            let client = Client(baseURL: url, transport: TransportKind.asyncHTTPClient.transport)
            for (path, words) in [("z/cut", "ended before"), ("z/corrupt", "not valid")] {
                let error = await #expect(throws: TrellisError.self) { try await client.data(for: get(url, path)) }
                guard case .connectionFailed(let failure) = error else {
                    Issue.record("expected connectionFailed for \(path), got \(String(describing: error))")
                    continue
                }
                #expect(failure.reason.contains(words), "\(path): \(failure.reason)")
            }
            var raw = try get(url, "z/gzip")
            try raw.setHeader("Accept-Encoding", "gzip")
            let response = try await client.data(for: raw)
            #expect(response.headerFields[.contentEncoding] == "gzip")
            var body = ByteBuffer(data: response.body)
            #expect(String(buffer: try body.decompress(with: .gzip())) == CompressedRoutes.post)

            // Off, nothing is asked for.
            let plain = Client(baseURL: url, transport: TransportKind.asyncHTTPClient.transport) { $0.compression.decodesResponses = false }
            _ = try await plain.data(for: get(url, "z/gzip"))
            #expect(routes.acceptEncodings.withLockedValue { $0 }.last == "")
        }
    }
}

/// A transport that decodes bodies (it wraps URLSession) and says it does not: the heads it
/// hands over name a coding its bytes no longer have.
private struct DecodingWithoutSaying: Transport {
    let inner: any Transport

    func send(_ request: Trellis.Request, within limits: ExchangeLimits) async throws -> Trellis.Response<Trellis.ResponseBody> {
        try await inner.send(request, within: limits)
    }
}
