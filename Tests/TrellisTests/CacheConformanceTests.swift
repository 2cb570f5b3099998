import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import SystemPackage
import Testing
import Trellis

/// The `http-tests/cache-tests` suite (the one behind cache-tests.fyi) against a small reverse
/// proxy made of one Trellis `Client` with an in-memory `HTTPCache`: the suite's own server is
/// the origin, its client runs as it runs for a browser's private cache, and its own
/// `determineTestResult` scores each test.
///
/// The suite is not part of this repository; `Scripts/cache-conformance <checkout>` runs this
/// against a checkout of it (Node.js, no packages of its own needed) and prints the score and
/// every test that does not pass. Without `TRELLIS_CACHE_TESTS` the suite is skipped.
@Suite(
    "HTTP cache: the cache-tests conformance suite",
    .enabled(if: ProcessInfo.processInfo.environment["TRELLIS_CACHE_TESTS"] != nil, "set TRELLIS_CACHE_TESTS to run")
)
struct CacheConformanceTests {
    /// Fields that belong to one connection, not to the message a proxy passes on.
    private static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length",
    ]

    /// Where Trellis rightly differs from a required test, and why.
    static let differences = [
        "headers-store-Set-Cookie":
            "a stored response would set its cookies again each time it is served, bringing back one deleted since; Chromium stores responses without them too",
    ]

    private struct Scored: Decodable {
        let result: String
        let detail: String
    }

    @Test func theSuite() async throws {
        let checkout = try #require(ProcessInfo.processInfo.environment["TRELLIS_CACHE_TESTS"])
        let origin = try await NodeProcess(
            arguments: ["test-engine/server/server.mjs"],
            in: checkout,
            environment: ["npm_config_protocol": "http", "npm_config_port": "0", "npm_config_pidfile": NSTemporaryDirectory() + "trellis-cache-tests.pid"]
        )
        defer { origin.stop() }
        let listening = try #require(origin.firstLine(containing: "Listening on"))
        let port = try #require(listening.split(separator: ":").last.flatMap { Int($0.filter(\.isNumber)) })
        let originURL = try #require(URL(string: "http://127.0.0.1:\(port)"))

        let client = Client(baseURL: originURL) {
            $0.cache = HTTPCache(memoryCapacity: 64 << 20)
            $0.redirects = .none
            $0.cookies = nil
            $0.compression.decodesResponses = false
            $0.validation.acceptedStatuses = Set(100...599)
        }
        // A raw SwiftNIO server: Hummingbird would set its own `Date` on every answer.
        let proxy = try await RawListener.bind {
            ProxyHandler { head, body in await Self.forward(head, body, to: originURL, through: client) }
        }
        defer { proxy.close(promise: nil) }
        let proxyPort = try #require(proxy.localAddress?.port)
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let driver = folder.appendingPathComponent("Scripts/cache-conformance-client.mjs").path
        let run = try await NodeProcess(arguments: [driver, checkout, "http://127.0.0.1:\(proxyPort)"], in: checkout, environment: [:])
        let output = try await run.waitForOutput()
        let scored = try JSONDecoder().decode([String: Scored].self, from: Data(output.utf8))
        let counts = Dictionary(grouping: scored.values, by: \.result).mapValues(\.count)
        print("cache-tests: \(counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))")
        for (id, entry) in scored.sorted(by: { $0.key < $1.key }) where !["pass", "yes", "no"].contains(entry.result) {
            print("  \(entry.result) \(id): \(Self.differences[id].map { "differs on purpose: " + $0 } ?? entry.detail)")
        }
        let failed = Set(scored.filter { $0.value.result == "fail" }.keys)
        #expect(failed.subtracting(Self.differences.keys).isEmpty, "failed: \(failed.sorted())")
    }

    /// A request sent on to the origin through `client`, and its answer as the proxy's.
    private static func forward(
        _ head: HTTPRequestHead,
        _ body: ByteBuffer,
        to origin: URL,
        through client: Client
    ) async -> (HTTPResponseHead, ByteBuffer) {
        do {
            let target = try #require(URL(string: origin.absoluteString + head.uri))
            var outgoing = try Trellis.Request(method: HTTPRequest.Method(head.method.rawValue)!, url: target)
            for (name, value) in head.headers where !hopByHop.contains(name.lowercased()) {
                if let fieldName = HTTPField.Name(name) { outgoing.headerFields.append(HTTPField(name: fieldName, value: value)) }
            }
            if body.readableBytes > 0 || ["POST", "PUT", "PATCH"].contains(head.method.rawValue) {
                outgoing.body = Trellis.RequestBody(Data(buffer: body), contentType: head.headers.first(name: "content-type") ?? "application/octet-stream")
            }
            let answer = try await client.data(for: outgoing, accepting: Set(100...599))
            var headers = HTTPHeaders()
            for field in answer.headerFields where !hopByHop.contains(field.name.canonicalName) {
                headers.add(name: field.name.rawName, value: field.value)
            }
            if head.method == .HEAD, let length = answer.headerFields[.contentLength] { headers.add(name: "Content-Length", value: length) }
            let status = HTTPResponseStatus(statusCode: answer.status.code, reasonPhrase: answer.status.reasonPhrase)
            return (HTTPResponseHead(version: .http1_1, status: status, headers: headers), ByteBuffer(data: answer.body))
        } catch {
            let headers: HTTPHeaders = ["X-Proxy-Error": "\(error)".replacingOccurrences(of: "\n", with: " ")]
            return (HTTPResponseHead(version: .http1_1, status: .badGateway, headers: headers), ByteBuffer())
        }
    }
}

/// The proxy's side of each connection: a whole request in, its answer out, one at a time.
private final class ProxyHandler: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = Never
    typealias OutboundOut = HTTPServerResponsePart

    let forward: @Sendable (HTTPRequestHead, ByteBuffer) async -> (HTTPResponseHead, ByteBuffer)
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(_ forward: @escaping @Sendable (HTTPRequestHead, ByteBuffer) async -> (HTTPResponseHead, ByteBuffer)) {
        self.forward = forward
    }

    func handlerAdded(context: ChannelHandlerContext) {
        try? context.pipeline.syncOperations.configureHTTPServerPipeline(position: .before(self))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var chunk):
            body.writeBuffer(&chunk)
        case .end:
            guard let head else { return }
            let body = body
            let forward = forward
            let promise = context.eventLoop.makePromise(of: (HTTPResponseHead, ByteBuffer).self)
            promise.completeWithTask { await forward(head, body) }
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { answer in
                var (responseHead, responseBody) = answer
                let bodiless = head.method == .HEAD || responseHead.status.code < 200 || [204, 304].contains(responseHead.status.code)
                if !bodiless {
                    responseHead.headers.replaceOrAdd(name: "Content-Length", value: String(responseBody.readableBytes))
                } else {
                    responseBody.clear()
                }
                let context = bound.value
                context.write(Self.wrapOutboundOut(.head(responseHead)), promise: nil)
                if responseBody.readableBytes > 0 { context.write(Self.wrapOutboundOut(.body(.byteBuffer(responseBody))), promise: nil) }
                context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}

/// A `node` process of the suite's, whose standard output is read line by line.
private final class NodeProcess: Sendable {
    private let process: ChildProcess
    private let output: FileHandle

    init(arguments: [String], in folder: String, environment: [String: String]) async throws {
        let pipe = try FileDescriptor.pipe()
        output = FileHandle(fileDescriptor: pipe.readEnd.rawValue, closeOnDealloc: true)
        process = try await ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["node", "--no-warnings"] + arguments, in: URL(fileURLWithPath: folder),
            environment: environment, output: .descriptor(pipe.writeEnd), separateStandardError: true)
    }

    /// Reads until a line holds `text`; `nil` when the output ends first.
    func firstLine(containing text: String) -> String? {
        var pending = Data()
        while true {
            let chunk = output.availableData
            if chunk.isEmpty { return nil }
            pending.append(chunk)
            let lines = String(decoding: pending, as: UTF8.self).split(separator: "\n")
            if let line = lines.first(where: { $0.contains(text) }) { return String(line) }
        }
    }

    /// Everything the process writes until it exits.
    func waitForOutput() async throws -> String {
        let data = output.readDataToEndOfFile()
        _ = try await process.terminationStatus()
        return String(decoding: data, as: UTF8.self)
    }

    func stop() {
        process.send(SIGTERM)
    }
}
