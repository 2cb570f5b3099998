import Foundation
import Testing
import Trellis

/// Runs `body` against a server with a fresh shelf of files.
func withTransferServer<Result: Sendable>(
    _ body: (URL, FileShelf) async throws -> Result
) async throws -> Result {
    let shelf = FileShelf()
    return try await TestServer.with(shelf.install) { url in try await body(url, shelf) }
}

/// A directory of its own for one test, removed afterwards.
func withScratchDirectory<Result>(_ body: (URL) async throws -> Result) async throws -> Result {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("trellis-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

@Suite("Downloads streamed to disk")
struct DownloadIntegrationTests {
    static let sizes = [0, 1, 200_000, 64 * 1024 * 1024]

    @Test(arguments: TransportKind.allCases, sizes)
    func aDownloadIsByteForByteWhatTheServerServed(_ kind: TransportKind, size: Int) async throws {
        try await withTransferServer { url, shelf in
            let blob = Blob(size: size, seed: UInt64(size))
            shelf["blob"] = blob
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let destination = directory.appendingPathComponent("blob.bin")
                let file = try await client.download(for: Request(method: .get, url: url.appending(path: "files/blob")), to: destination)
                #expect(file.url == destination)
                #expect(file.byteCount == Int64(size))
                #expect(file.head.status == .ok)
                #expect(try Digest.hex(ofFile: destination) == blob.sha256)
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
                #expect(leftovers == ["blob.bin"])
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aDownloadWithoutDestinationGoesToANewTemporaryFile(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            shelf["report.pdf"] = Blob(size: 5000, seed: 9)
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            let request = try Request(method: .get, url: url.appending(path: "files/report.pdf"))
            let first = try await client.download(for: request)
            // The same file by URL, Foundation's `download(from:)` spelling.
            let second = try await client.download(from: url.appending(path: "files/report.pdf"))
            defer {
                try? FileManager.default.removeItem(at: first.url)
                try? FileManager.default.removeItem(at: second.url)
            }
            #expect(first.url != second.url)
            #expect(first.url.lastPathComponent.hasSuffix("report.pdf"))
            #expect(try Digest.hex(ofFile: first.url) == shelf["report.pdf"]!.sha256)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aDroppedDownloadResumesFromTheBytesOnDisk(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            let blob = Blob(size: 8 * 1024 * 1024, seed: 21)
            shelf["big"] = blob
            shelf.dropNext("big", after: 3 * 1024 * 1024)
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let destination = directory.appendingPathComponent("big.bin")
                let request = try Request(method: .get, url: url.appending(path: "files/big"))
                let interrupted = client.downloadTask(for: request, to: destination)
                let failure = await interrupted.result
                guard case .failure(TrellisError.connectionFailed) = failure else {
                    Issue.record("expected connectionFailed, got \(failure)")
                    return
                }
                #expect(!FileManager.default.fileExists(atPath: destination.path))
                let resumeData = try #require(interrupted.resumeData)
                #expect(resumeData.byteCount > 0)
                #expect(resumeData.byteCount <= 3 * 1024 * 1024)
                #expect(resumeData.validator == blob.etag)

                let resumed = try await client.download(for: request, to: destination, resumingFrom: resumeData)
                #expect(resumed.head.status == .partialContent)
                #expect(resumed.resumedByteCount == resumeData.byteCount)
                #expect(resumed.byteCount == Int64(blob.bytes.readableBytes))
                #expect(shelf.rangesSeen == ["", "bytes=\(resumeData.byteCount)-"])
                #expect(try Digest.hex(ofFile: destination) == blob.sha256)
                #expect(!FileManager.default.fileExists(atPath: resumeData.partialFile.path))
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aServerThatIgnoresRangeRestartsTheFileCleanly(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            let blob = Blob(size: 4 * 1024 * 1024, seed: 5)
            shelf["file"] = blob
            shelf.dropNext("file", after: 1024 * 1024)
            shelf.ignoreRange(for: "file")
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let destination = directory.appendingPathComponent("file.bin")
                let request = try Request(method: .get, url: url.appending(path: "files/file"))
                let interrupted = client.downloadTask(for: request, to: destination)
                _ = await interrupted.result
                let resumeData = try #require(interrupted.resumeData)
                let restarted = try await client.download(for: request, to: destination, resumingFrom: resumeData)
                #expect(restarted.head.status == .ok)
                #expect(restarted.resumedByteCount == 0)
                #expect(try Digest.hex(ofFile: destination) == blob.sha256)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aChangedETagRestartsTheFileWithTheNewContent(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            shelf["doc"] = Blob(size: 4 * 1024 * 1024, seed: 1)
            shelf.dropNext("doc", after: 1024 * 1024)
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let destination = directory.appendingPathComponent("doc.bin")
                let request = try Request(method: .get, url: url.appending(path: "files/doc"))
                let interrupted = client.downloadTask(for: request, to: destination)
                _ = await interrupted.result
                let resumeData = try #require(interrupted.resumeData)

                let replacement = Blob(size: 3 * 1024 * 1024 + 17, seed: 2)
                shelf["doc"] = replacement
                let restarted = try await client.download(for: request, to: destination, resumingFrom: resumeData)
                #expect(restarted.head.status == .ok)
                #expect(restarted.resumedByteCount == 0)
                #expect(shelf.rangesSeen.last == "bytes=\(resumeData.byteCount)-")
                #expect(try Digest.hex(ofFile: destination) == replacement.sha256)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func progressRisesToTheTotalAndEndsFinished(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            let blob = Blob(size: 6 * 1024 * 1024, seed: 3)
            shelf["blob"] = blob
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let task = client.downloadTask(
                    for: try Request(method: .get, url: url.appending(path: "files/blob")),
                    to: directory.appendingPathComponent("blob")
                )
                let (file, updates) = try await recordingProgress(of: task)
                #expect(file.byteCount == 6 * 1024 * 1024)
                #expect(updates.first?.completedBytes == 0)
                #expect(updates.first?.isFinished == false)
                #expect(zip(updates, updates.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
                let last = try #require(updates.last)
                #expect(last.isFinished)
                #expect(last.completedBytes == 6 * 1024 * 1024)
                #expect(last.totalBytes == Int64(6 * 1024 * 1024))
                #expect(last.fractionCompleted == 1)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func cancellingMidwayStopsTheTransferAndLeavesNoFinishedFile(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            shelf["endless"] = Blob(size: 16 * 1024 * 1024, seed: 4)
            shelf.stall("endless")
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let destination = directory.appendingPathComponent("endless.bin")
                let task = client.downloadTask(
                    for: try Request(method: .get, url: url.appending(path: "files/endless")),
                    to: destination
                )
                task.start()
                for await progress in task.progress where progress.completedBytes > 0 {
                    task.cancel()
                    break
                }
                let outcome = await task.result
                guard case .failure(let error) = outcome, error is CancellationError else {
                    Issue.record("expected CancellationError, got \(outcome)")
                    return
                }
                #expect(!FileManager.default.fileExists(atPath: destination.path))
                // The server sent an ETag, so the bytes received are kept to resume from.
                let resumeData = try #require(task.resumeData)
                #expect(FileManager.default.fileExists(atPath: resumeData.partialFile.path))
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aMissingFileIsAnUnacceptableStatusAndNoFile(_ kind: TransportKind) async throws {
        try await withTransferServer { url, _ in
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let destination = directory.appendingPathComponent("none")
                let error = await #expect(throws: TrellisError.self) {
                    try await client.download(for: Request(method: .get, url: url.appending(path: "files/none")), to: destination)
                }
                guard case .unacceptableStatus(let failure) = error else {
                    Issue.record("expected unacceptableStatus, got \(String(describing: error))")
                    return
                }
                #expect(failure.status == .notFound)
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
                #expect(leftovers.isEmpty)
            }
        }
    }

    @Test func aDestinationInAMissingDirectoryIsAFileFailure() async throws {
        try await withTransferServer { url, shelf in
            shelf["blob"] = Blob(size: 10, seed: 1)
            let client = Client(baseURL: url) { $0.timeouts = .patient }
            let error = await #expect(throws: TrellisError.self) {
                try await client.download(
                    for: Request(method: .get, url: url.appending(path: "files/blob")),
                    to: URL(fileURLWithPath: "/nonexistent-\(UUID().uuidString)/blob")
                )
            }
            guard case .fileFailed(let failure) = error else {
                Issue.record("expected fileFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.operation == "open")
            #expect(failure.path.hasPrefix("/nonexistent-"))
        }
    }
}
