import Crypto
import Foundation
import Hummingbird
import MultipartKit
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Trellis
@testable import TrellisTesting

/// Bytes that look random and are the same on every run, and their SHA-256.
///
/// A 64 KiB random block repeated, each copy stamped with its index: a misplaced, repeated or
/// missing chunk changes the digest. Made with plain copies of memory, so that a 64 MiB blob
/// takes milliseconds even in a debug build under ThreadSanitizer: made through `ByteBuffer`'s
/// generic calls there, blobs held the suite's two cooperative threads for tens of seconds and
/// every other test's calls timed out waiting for them.
struct Blob: Sendable {
    let bytes: ByteBuffer
    let etag: String

    init(size: Int, seed: UInt64, etag: String? = nil) {
        var generator = SeededGenerator(seed: seed)
        let block = (0..<(8 * 1024)).map { _ in generator.next().bigEndian }
        var buffer = ByteBuffer()
        if size > 0 {
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { target in
                block.withUnsafeBytes { source in
                    var offset = 0
                    var index: UInt64 = 0
                    while offset < size {
                        let count = min(source.count, size - offset)
                        let copy = target.baseAddress! + offset
                        copy.copyMemory(from: source.baseAddress!, byteCount: count)
                        withUnsafeBytes(of: (index ^ seed).bigEndian) { copy.copyMemory(from: $0.baseAddress!, byteCount: min(8, count)) }
                        offset += count
                        index += 1
                    }
                }
                return size
            }
        }
        self.bytes = buffer
        self.etag = etag ?? "\"\(seed)-\(size)\""
    }

    var data: Data { bytes.withUnsafeReadableBytes { Data($0) } }
    var sha256: String { Digest.hex(of: bytes) }
}

enum Digest {
    static func hex(of buffer: ByteBuffer) -> String {
        var hasher = SHA256()
        buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
        return hex(hasher.finalize())
    }

    static func hex(ofFile url: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return hex(hasher.finalize())
    }

    static func hex(_ digest: SHA256.Digest) -> String {
        digest.map { String(format: "%02x", $0) }.joined()
    }
}

/// What the server saw of an upload.
struct ReceivedUpload: Codable, Sendable, Equatable {
    var bytes: Int
    var sha256: String
    var contentType: String?
    var contentLength: String?
}

/// One part of a multipart upload as multipart-kit parsed it on the server.
struct ReceivedPart: Codable, Sendable, Equatable {
    var disposition: String
    var contentType: String?
    var bytes: Int
    var sha256: String
    var text: String?
}

/// The files a transfer test server serves and the faults it injects.
final class FileShelf: Sendable {
    private struct State {
        var blobs: [String: Blob] = [:]
        var ignoresRange: Set<String> = []
        var dropAfter: [String: Int] = [:]
        var stalled: Set<String> = []
        var rangesSeen: [String] = []
        var inFlight = 0
        var mostInFlight = 0
    }

    private let state = NIOLockedValueBox(State())

    subscript(name: String) -> Blob? {
        get { state.withLockedValue { $0.blobs[name] } }
        set { state.withLockedValue { $0.blobs[name] = newValue } }
    }

    /// Serves the whole body (200) even when asked for a range.
    func ignoreRange(for name: String) { state.withLockedValue { _ = $0.ignoresRange.insert(name) } }
    /// The next response for `name` stops after `bytes` bytes and closes the connection.
    func dropNext(_ name: String, after bytes: Int) { state.withLockedValue { $0.dropAfter[name] = bytes } }
    /// Responses for `name` send their first MiB, then nothing more, ever.
    func stall(_ name: String) { state.withLockedValue { _ = $0.stalled.insert(name) } }

    var rangesSeen: [String] { state.withLockedValue { $0.rangesSeen } }
    var mostInFlight: Int { state.withLockedValue { $0.mostInFlight } }

    func install(_ router: Router<BasicRequestContext>) {
        router.get("files/:name") { request, context in
            try self.serve(request, name: context.parameters.require("name"))
        }
        router.post("upload") { request, _ in
            var hasher = SHA256()
            var count = 0
            for try await chunk in request.body {
                chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                count += chunk.readableBytes
            }
            let received = ReceivedUpload(
                bytes: count,
                sha256: Digest.hex(hasher.finalize()),
                contentType: request.headers[.contentType],
                contentLength: request.headers[.contentLength]
            )
            return try TestRoutes.json(received)
        }
        router.post("multipart") { request, _ in
            try await TestRoutes.json(Self.parseMultipart(request))
        }
    }

    private func serve(_ request: Request, name: String) throws -> Response {
        let (blob, ignoresRange, dropAfter, stalled) = try state.withLockedValue { state in
            guard let blob = state.blobs[name] else { throw HTTPError(.notFound) }
            state.rangesSeen.append(request.headers[.range] ?? "")
            state.inFlight += 1
            state.mostInFlight = max(state.mostInFlight, state.inFlight)
            return (blob, state.ignoresRange.contains(name), state.dropAfter.removeValue(forKey: name), state.stalled.contains(name))
        }
        var bytes = blob.bytes
        var status = HTTPResponse.Status.ok
        var headers: HTTPFields = [.eTag: blob.etag, .acceptRanges: "bytes", .contentType: "application/octet-stream"]
        if !ignoresRange, let range = request.headers[.range], range.hasPrefix("bytes="),
            let start = Int(range.dropFirst(6).dropLast()), range.hasSuffix("-"),
            request.headers[.ifRange] == nil || request.headers[.ifRange] == blob.etag
        {
            guard start < blob.bytes.readableBytes else {
                state.withLockedValue { $0.inFlight -= 1 }
                return Response(status: .rangeNotSatisfiable, headers: [.contentRange: "bytes */\(blob.bytes.readableBytes)"])
            }
            status = .partialContent
            headers[.contentRange] = "bytes \(start)-\(blob.bytes.readableBytes - 1)/\(blob.bytes.readableBytes)"
            bytes = blob.bytes.getSlice(at: start, length: blob.bytes.readableBytes - start)!
        }
        let length = bytes.readableBytes
        return Response(status: status, headers: headers, body: .init(contentLength: length) { [self, bytes] writer in
            defer { state.withLockedValue { $0.inFlight -= 1 } }
            var remaining = bytes
            var sent = 0
            while remaining.readableBytes > 0 {
                let size = min(remaining.readableBytes, 64 * 1024)
                let chunk = remaining.readSlice(length: size)!
                try await writer.write(chunk)
                sent += size
                if let dropAfter, sent >= dropAfter {
                    throw HTTPError(.internalServerError, message: "dropped on purpose")
                }
                if stalled, sent >= 1024 * 1024 {
                    try await Task.sleep(for: .seconds(3600))
                }
            }
            try await writer.finish(nil)
        })
    }

    private static func parseMultipart(_ request: Request) async throws -> [ReceivedPart] {
        guard let contentType = request.headers[.contentType], contentType.hasPrefix("multipart/form-data; boundary=") else {
            throw HTTPError(.badRequest, message: "not multipart/form-data")
        }
        let boundary = String(contentType.dropFirst("multipart/form-data; boundary=".count))
        let body = try await request.body.collect(upTo: 64 << 20)
        // On SwiftNIO's thread pool: MultipartKit reads byte by byte, which in a debug build
        // under ThreadSanitizer holds a thread for seconds per MiB; on one of the two
        // cooperative threads that starved every other test's tasks.
        return try await NIOThreadPool.singleton.runIfActive { try parseMultipart(body, boundary: boundary) }
    }

    private static func parseMultipart(_ body: ByteBuffer, boundary: String) throws -> [ReceivedPart] {
        let parser = MultipartParser(boundary: boundary)
        let parts = NIOLockedValueBox<[ReceivedPart]>([])
        let current = NIOLockedValueBox<(headers: [String: String], hasher: SHA256, bytes: Int, text: [UInt8])>(([:], SHA256(), 0, []))
        parser.onHeader = { name, value in current.withLockedValue { $0.headers[name.lowercased()] = value } }
        parser.onBody = { buffer in
            current.withLockedValue { part in
                buffer.withUnsafeReadableBytes { part.hasher.update(bufferPointer: $0) }
                part.bytes += buffer.readableBytes
                if part.text.count < 1024 { part.text += buffer.readableBytesView.prefix(1024 - part.text.count) }
            }
        }
        parser.onPartComplete = {
            let finished = current.withLockedValue { part in
                defer { part = ([:], SHA256(), 0, []) }
                return part
            }
            parts.withLockedValue {
                $0.append(ReceivedPart(
                    disposition: finished.headers["content-disposition"] ?? "",
                    contentType: finished.headers["content-type"],
                    bytes: finished.bytes,
                    sha256: Digest.hex(finished.hasher.finalize()),
                    text: String(validating: finished.text, as: UTF8.self)
                ))
            }
        }
        try parser.execute(body)
        return parts.withLockedValue { $0 }
    }
}

/// Runs `task` with a progress consumer that subscribed before it started, and returns its
/// value with every update the consumer saw.
func recordingProgress<Value: Sendable>(of task: TransferTask<Value>) async throws -> (Value, [TransferProgress]) {
    let (subscribed, subscribedSink) = AsyncStream.makeStream(of: Void.self)
    async let updates: [TransferProgress] = {
        var seen: [TransferProgress] = []
        for await progress in task.progress {
            if seen.isEmpty { subscribedSink.yield() }
            seen.append(progress)
        }
        return seen
    }()
    for await _ in subscribed { break }
    let value = try await task.value
    return (value, await updates)
}
