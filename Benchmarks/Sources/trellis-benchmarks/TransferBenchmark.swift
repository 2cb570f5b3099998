import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import NIOFoundationCompat
import Trellis

/// A large download to disk and a large multipart upload from disk, through Trellis and through
/// raw AsyncHTTPClient streaming the same bytes, each in a child process of its own so that its
/// peak resident memory (`VmHWM`) is its alone.
enum TransferBenchmark {
    static var size: Int64 {
        Int64(ProcessInfo.processInfo.environment["TRELLIS_BENCH_TRANSFER_MIB"].flatMap(Int.init) ?? 1024) * 1024 * 1024
    }

    enum Case: String, CaseIterable {
        case rawDownload = "raw-download"
        case trellisDownload = "trellis-download"
        case rawUpload = "raw-upload"
        case trellisUpload = "trellis-upload"
    }

    struct Measurement {
        var milliseconds: Double
        var peakResidentMiB: Double
    }

    static func run(rounds: Int) async throws -> [Row] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("trellis-transfer-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent("source.bin")
        try writeSource(to: source, size: size)

        return try await withServer(installRoutes) { url in
            var measured: [Case: [Measurement]] = [:]
            for _ in 0..<rounds {
                for kind in Case.allCases {
                    measured[kind, default: []].append(try child(kind, url: url, directory: directory, source: source))
                }
            }
            func row(_ name: String, _ baseline: Case, _ measuredCase: Case) -> Row {
                let base = median(measured[baseline]!.map(\.milliseconds))
                let value = median(measured[measuredCase]!.map(\.milliseconds))
                let mib = Double(size) / 1_048_576
                let baseRSS = measured[baseline]!.map(\.peakResidentMiB).max() ?? 0
                let valueRSS = measured[measuredCase]!.map(\.peakResidentMiB).max() ?? 0
                return Row(
                    name: name, baseline: "raw AsyncHTTPClient", baselineValue: base, value: value, unit: "ms",
                    note: String(
                        format: "%.0f vs %.0f MiB/s (%.0f%% of raw); peak RSS %.1f MiB vs %.1f MiB",
                        mib / (value / 1000), mib / (base / 1000), 100 * base / value, valueRSS, baseRSS
                    )
                )
            }
            return [
                row("download \(size >> 20) MiB to disk", .rawDownload, .trellisDownload),
                row("multipart upload \(size >> 20) MiB from disk", .rawUpload, .trellisUpload),
            ]
        }
    }

    // MARK: Parent

    static func installRoutes(_ router: Router<BasicRequestContext>) {
        let block = ByteBuffer(repeating: 0x5A, count: 1024 * 1024)
        router.get("blob/:size") { _, context in
            let size = try context.parameters.require("size", as: Int.self)
            return Response(status: .ok, headers: [.eTag: "\"bench\"", .contentType: "application/octet-stream"], body: .init(contentLength: size) { writer in
                var remaining = size
                while remaining > 0 {
                    let count = min(remaining, block.readableBytes)
                    try await writer.write(block.getSlice(at: 0, length: count)!)
                    remaining -= count
                }
                try await writer.finish(nil)
            })
        }
        router.post("sink") { request, _ in
            var count = 0
            for try await chunk in request.body { count += chunk.readableBytes }
            return "\(count)"
        }
    }

    private static func writeSource(to url: URL, size: Int64) throws {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        let block = Data(repeating: 0xA5, count: 1024 * 1024)
        var written: Int64 = 0
        while written < size {
            let count = Int(min(Int64(block.count), size - written))
            try handle.write(contentsOf: block.prefix(count))
            written += Int64(count)
        }
    }

    private static func child(_ kind: Case, url: URL, directory: URL, source: URL) throws -> Measurement {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
        process.arguments = ["transfer-child", kind.rawValue, url.absoluteString, directory.path, source.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0, let line = text.split(separator: "\n").last(where: { $0.hasPrefix("RESULT ") }) else {
            throw BenchmarkFailure(description: "\(kind.rawValue) failed: \(text)")
        }
        let fields = line.split(separator: " ")
        guard fields.count == 3, let milliseconds = Double(fields[1]), let peak = Double(fields[2]) else {
            throw BenchmarkFailure(description: "\(kind.rawValue) printed \(line)")
        }
        return Measurement(milliseconds: milliseconds, peakResidentMiB: peak / 1024)
    }

    // MARK: Child

    /// Runs one case in this (child) process and prints `RESULT <ms> <VmHWM in KiB>`.
    static func runChild(_ arguments: [String]) async throws {
        guard arguments.count == 4, let kind = Case(rawValue: arguments[0]), let url = URL(string: arguments[1]) else {
            throw BenchmarkFailure(description: "usage: transfer-child <case> <url> <directory> <source>")
        }
        let directory = URL(fileURLWithPath: arguments[2])
        let source = URL(fileURLWithPath: arguments[3])
        let destination = directory.appendingPathComponent("download-\(kind.rawValue).bin")
        defer { try? FileManager.default.removeItem(at: destination) }
        let elapsed: Double
        switch kind {
        case .rawDownload:
            elapsed = try await milliseconds { try await rawDownload(url.appending(path: "blob/\(size)"), to: destination) }
        case .trellisDownload:
            let client = Client(baseURL: url, transport: AsyncHTTPClientTransport.shared)
            let request = try Trellis.Request(method: .get, url: url.appending(path: "blob/\(size)"))
            elapsed = try await milliseconds {
                let file = try await client.download(for: request, to: destination)
                guard file.byteCount == size else { throw BenchmarkFailure(description: "downloaded \(file.byteCount) bytes") }
            }
        case .rawUpload:
            elapsed = try await milliseconds { try await rawUpload(source, to: url.appending(path: "sink")) }
        case .trellisUpload:
            let client = Client(baseURL: url, transport: AsyncHTTPClientTransport.shared) { $0.timeouts.request = .seconds(600) }
            var form = MultipartForm()
            try form.addFile("file", fileAt: source)
            let request = try Trellis.Request(method: .post, url: url.appending(path: "sink"))
            elapsed = try await milliseconds {
                let received = try await client.multipartUploadTask(for: request, form: form, as: String.self).value
                guard Int64(received) == form.length else { throw BenchmarkFailure(description: "the server received \(received) bytes") }
            }
        }
        print("RESULT \(elapsed) \(peakResidentKiB())")
    }

    /// What a developer writes with AsyncHTTPClient alone: stream the body into a file handle.
    private static func rawDownload(_ url: URL, to destination: URL) async throws {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(600))
        _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
        let handle = try FileHandle(forWritingTo: destination)
        defer { try? handle.close() }
        var received: Int64 = 0
        for try await chunk in response.body {
            try handle.write(contentsOf: chunk.readableBytesView)
            received += Int64(chunk.readableBytes)
        }
        guard received == size else { throw BenchmarkFailure(description: "downloaded \(received) bytes") }
    }

    /// The same bytes streamed from the file as the body, without multipart framing.
    private static func rawUpload(_ source: URL, to url: URL) async throws {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.body = .stream(FileChunks(url: source), length: .known(size))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(600))
        let body = try await response.body.collect(upTo: 1024)
        guard Int64(String(buffer: body)) == size else { throw BenchmarkFailure(description: "the server received \(String(buffer: body))") }
    }

    private struct FileChunks: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let url: URL

        struct AsyncIterator: AsyncIteratorProtocol {
            let handle: FileHandle?
            mutating func next() async throws -> ByteBuffer? {
                guard let data = try handle?.read(upToCount: 1024 * 1024), !data.isEmpty else { return nil }
                return ByteBuffer(data: data)
            }
        }

        func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(handle: try? FileHandle(forReadingFrom: url))
        }
    }

    private static func peakResidentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}
