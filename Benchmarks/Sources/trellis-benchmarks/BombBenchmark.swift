import CompressNIO
import Foundation
import Hummingbird
import NIOCore
import Trellis

/// The `bomb` suite: a server sends a gzip body that inflates a thousandfold; the client must
/// stop it at its ratio limit quickly and with its memory flat. Measured for a buffered call
/// and for a streamed one (which has no size limit, only the ratio), each against the time and
/// memory of reading the compressed bytes as they are (`Accept-Encoding` of the caller's own).
enum BombBenchmark {
    static let inflatedMiB = 1024

    static func run() async throws -> [Row] {
        let bomb = try makeBomb()
        Swift.print("bomb: \(bomb.readableBytes / 1024) KiB of gzip for \(inflatedMiB) MiB")
        return try await withServer({ router in
            router.get("bomb") { _, _ in
                Hummingbird.Response(
                    status: .ok,
                    headers: [.contentType: "application/octet-stream", .contentEncoding: "gzip", .contentLength: String(bomb.readableBytes)],
                    body: .init(byteBuffer: bomb)
                )
            }
        }) { url in
            let client = Client(baseURL: url)
            let request = try Trellis.Request(method: .get, url: url.appending(path: "bomb"))
            var raw = request
            try raw.setHeader("Accept-Encoding", "gzip")
            var rows: [Row] = []
            let rawBuffered = try await measure { _ = try await client.data(for: raw) }
            let buffered = try await measure { _ = try await client.data(for: request) }
            rows.append(Row(
                name: "buffered call (data(for:))", baseline: "the compressed bytes as sent",
                baselineValue: rawBuffered.milliseconds, value: buffered.milliseconds, unit: "ms",
                note: "\(buffered.outcome); peak RSS growth \(buffered.growthMiB) MiB vs \(rawBuffered.growthMiB) MiB"
            ))
            let rawStreamed = try await measure { try await drain(client.send(raw).body) }
            let streamed = try await measure { try await drain(client.send(request).body) }
            rows.append(Row(
                name: "streamed call (send, read to the end)", baseline: "the compressed bytes as sent",
                baselineValue: rawStreamed.milliseconds, value: streamed.milliseconds, unit: "ms",
                note: "\(streamed.outcome); peak RSS growth \(streamed.growthMiB) MiB vs \(rawStreamed.growthMiB) MiB"
            ))
            return rows
        }
    }

    private struct Measurement {
        var milliseconds: Double
        var growthMiB: String
        var outcome: String
    }

    private static func measure(_ body: () async throws -> Void) async throws -> Measurement {
        resetPeak()
        let before = residentKiB("VmRSS:")
        let start = ContinuousClock.now
        var outcome = "completed"
        do {
            try await body()
        } catch {
            outcome = "stopped: \(error)".prefix(90) + "…"
        }
        let elapsed = ContinuousClock.now - start
        let growth = Double(max(0, residentKiB("VmHWM:") - before)) / 1024
        let ms = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
        return Measurement(milliseconds: ms, growthMiB: String(format: "%.1f", growth), outcome: outcome)
    }

    private static func drain(_ body: Trellis.ResponseBody) async throws {
        for try await _ in body {}
    }

    /// gzip of `inflatedMiB` MiB of zeros, compressed 16 MiB at a time.
    private static func makeBomb() throws -> ByteBuffer {
        let compressor = try ZlibCompressor(algorithm: .gzip)
        var zeros = ByteBufferAllocator().buffer(capacity: 16 << 20)
        var output = ByteBufferAllocator().buffer(capacity: 2 << 20)
        for _ in 0..<(inflatedMiB / 16) {
            zeros.clear()
            zeros.writeRepeatingByte(0, count: 16 << 20)
            var piece = ByteBufferAllocator().buffer(capacity: compressor.maxSize(from: zeros))
            try compressor.deflate(from: &zeros, to: &piece, flush: .no)
            output.writeBuffer(&piece)
        }
        var empty = ByteBufferAllocator().buffer(capacity: 16)
        var tail = ByteBufferAllocator().buffer(capacity: 1 << 20)
        try compressor.deflate(from: &empty, to: &tail, flush: .finish)
        output.writeBuffer(&tail)
        return output
    }

    /// Resets the kernel's peak-resident counter (`VmHWM`), so that the next reading is the
    /// peak of what follows.
    private static func resetPeak() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }
}
