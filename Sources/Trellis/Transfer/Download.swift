public import Foundation
public import HTTPTypes
import NIOCore

/// A downloaded file, complete and in place.
public struct DownloadedFile: Sendable {
    /// Where the file is: the destination you gave, or a new file in the temporary directory
    /// that is yours to move or delete.
    public let url: URL
    /// The head of the response that delivered the bytes (206 for a resumed download).
    public let head: HTTPResponse
    /// The file's size in bytes.
    public let byteCount: Int64
    /// How many of those bytes came from an earlier, interrupted attempt.
    public let resumedByteCount: Int64
}

/// What a new download needs to carry on where an interrupted one stopped: the partial file and
/// the validator that proves the server still has the same content. `Codable`, so an app can
/// keep it across launches.
public struct ResumeData: Codable, Sendable, Equatable {
    /// The URL of the interrupted request.
    public let url: String
    /// The bytes received so far.
    public let partialFile: URL
    /// The final destination the download was headed for.
    public let destination: URL
    /// The response's strong `ETag`, or its `Last-Modified`, sent back as `If-Range`.
    public let validator: String
    /// How many bytes the partial file held when the download stopped.
    public let byteCount: Int64
}

extension Client {
    /// Downloads the response body of `request` to a file, streaming it to disk in constant
    /// memory.
    ///
    /// The bytes go to `<destination>.trellis-partial` and the file is renamed to `destination`
    /// only when every byte has arrived, so a partial file never takes the place of a finished
    /// one. The client's timeout covers the wait for the response head; the body may take as
    /// long as it takes, as long as no byte takes longer than the idle timeout.
    /// ``maximumBodySize`` does not apply.
    ///
    /// - Parameters:
    ///   - request: what to download.
    ///   - destination: where the file goes, replacing any file there; a new file in the
    ///     temporary directory when `nil`.
    ///   - resumeData: from an interrupted download's ``TransferTask/resumeData``: the request
    ///     asks for the remaining bytes with `Range` and `If-Range`. A server that sends the
    ///     whole body instead (it ignores ranges, or the content changed) gets a clean restart.
    /// - Throws: ``TrellisError/unacceptableStatus(_:)`` for a status other than 200 or 206,
    ///   ``TrellisError/fileFailed(_:)`` when the file cannot be written, and the transport's
    ///   errors. After a failure the partial file is kept when the download can be resumed.
    public func download(
        for request: Request,
        to destination: URL? = nil,
        resumingFrom resumeData: ResumeData? = nil
    ) async throws -> DownloadedFile {
        try await downloadTask(for: request, to: destination, resumingFrom: resumeData).value
    }

    /// Downloads `url` with a GET, as ``download(for:to:resumingFrom:)`` does a request.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when `url` is not an absolute `http` or
    ///   `https` URL, and what ``download(for:to:resumingFrom:)`` throws.
    public func download(from url: URL, to destination: URL? = nil) async throws -> DownloadedFile {
        try await download(for: Request(method: .get, url: url), to: destination)
    }

    /// The earlier spelling of ``download(for:to:resumingFrom:)``.
    @available(*, deprecated, renamed: "download(for:to:resumingFrom:)")
    public func download(
        _ request: Request,
        to destination: URL? = nil,
        resumingFrom resumeData: ResumeData? = nil
    ) async throws -> DownloadedFile {
        try await download(for: request, to: destination, resumingFrom: resumeData)
    }

    /// A download as a task with progress, started when awaited (see ``download(for:to:resumingFrom:)``).
    public func downloadTask(
        for request: Request,
        to destination: URL? = nil,
        resumingFrom resumeData: ResumeData? = nil
    ) -> DownloadTask {
        let resumeState = ResumeState()
        return DownloadTask(resumeState: resumeState) { reporter in
            var download = Download(
                client: self,
                request: request,
                destination: destination ?? resumeData?.destination ?? Download.temporaryDestination(for: request),
                reporter: reporter
            )
            return try await download.run(resumingFrom: resumeData, state: resumeState)
        }
    }
}

/// One download: the request, the partial file and the bookkeeping to resume.
struct Download {
    let client: Client
    let request: Request
    let destination: URL
    let reporter: ProgressReporter

    var partialPath: String { destination.path + ".trellis-partial" }

    static func temporaryDestination(for request: Request) -> URL {
        let name = request.url?.lastPathComponent ?? ""
        let suffix = name.isEmpty || name == "/" ? "" : "-" + name
        return FileManager.default.temporaryDirectory.appendingPathComponent("trellis-\(UUID().uuidString)\(suffix)")
    }

    mutating func run(resumingFrom resumeData: ResumeData?, state: ResumeState) async throws -> DownloadedFile {
        var offset: Int64 = 0
        var validator: String?
        if let resumeData {
            guard resumeData.url == request.urlString else {
                throw TrellisError.invalidRequest(InvalidRequest(
                    .header("Range"), "the resume data is for \(resumeData.url), not \(request.urlString)"
                ))
            }
            if resumeData.partialFile.path == partialPath, let onDisk = FileIO.existingSize(partialPath), onDisk > 0 {
                offset = onDisk
                validator = resumeData.validator
            }
        }

        var response = try await send(from: offset, validator: validator)
        var total: Int64?
        switch response.status.code {
        case 206 where offset > 0:
            guard let range = ContentRange(response.headerFields[.contentRange]), range.start == offset,
                Download.validator(of: response.head).map({ $0 == validator }) ?? true
            else {
                // A range we did not ask for, or of other content (a server that ignores
                // If-Range): start again without one rather than splice.
                await response.body.discard()
                offset = 0
                response = try await send(from: 0, validator: nil)
                total = response.body.expectedLength
                break
            }
            total = range.total ?? response.body.expectedLength.map { length in
                let (sum, overflow) = length.addingReportingOverflow(offset)
                return overflow ? Int64.max : sum
            }
        case 206:
            // Part of a body is only the answer to a request for that part: one the caller
            // asked for with its own Range, which the file then holds alone.
            guard let range = ContentRange(response.headerFields[.contentRange]),
                ByteRangeRequest(request.headerFields[.range])?.isAnswered(by: range) == true
            else {
                throw await client.statusFailure(response, for: request)
            }
            offset = 0
            total = range.end - range.start + 1
        case 200...299:
            offset = 0
            total = response.body.expectedLength
        case 416 where offset > 0:
            // The partial file is no prefix of what the server has now.
            await response.body.discard()
            offset = 0
            response = try await send(from: 0, validator: nil)
            total = response.body.expectedLength
        default:
            break
        }
        guard (200...299).contains(response.status.code),
            response.status.code != 206 || offset > 0 || request.headerFields[.range] != nil
        else {
            throw await client.statusFailure(response, for: request)
        }
        if let encoding = response.headerFields[.contentEncoding], encoding.lowercased() != "identity" {
            // A transport that decodes compressed bodies (URLSession does) delivers more bytes
            // than Content-Length counts.
            total = nil
        }

        let resumedFrom = offset
        let newValidator = Download.validator(of: response.head)
        reporter.begin(completed: offset, total: total)
        let file = try await TransferFile.openForWriting(partialPath, keeping: offset)
        var written = offset
        do {
            written = try await receive(response.body, into: file, from: offset)
        } catch {
            written = FileIO.existingSize(partialPath) ?? written
            keepForResume(newValidator, bytes: written, state: state)
            throw error
        }
        if let total, written != total {
            keepForResume(newValidator, bytes: written, state: state)
            throw TrellisError.connectionFailed(ConnectionFailure(
                host: request.head.authority ?? "",
                reason: "the download ended after \(written) of \(total) bytes"
            ))
        }
        try await FileIO.moveIntoPlace(partialPath, destination.path)
        return DownloadedFile(url: destination, head: response.head, byteCount: written, resumedByteCount: resumedFrom)
    }

    private func send(from offset: Int64, validator: String?) async throws -> Response<ResponseBody> {
        var request = request
        if offset > 0, let validator {
            request.headerFields[.range] = "bytes=\(offset)-"
            request.headerFields[.ifRange] = validator
        } else {
            request.headerFields[.range] = nil
            request.headerFields[.ifRange] = nil
        }
        // The file holds the bytes as the server has them, so that a resumed download's range
        // counts the same bytes: no compression is asked for.
        if request.headerFields[.acceptEncoding] == nil { request.headerFields[.acceptEncoding] = "identity" }
        return try await client.send(request)
    }

    /// Streams the body to the file, returning the file's length.
    ///
    /// Chunks are gathered into batches of about ``FileIO/chunkSize`` bytes, and one batch is
    /// written while the next is received, so the disk and the network work at the same time
    /// and memory stays at about two batches whatever the size.
    private func receive(_ body: ResponseBody, into file: TransferFile, from start: Int64) async throws -> Int64 {
        var writer = BatchedWriter(file: file, written: start)
        do {
            for try await chunk in body {
                reporter.advance(by: chunk.readableBytes)
                try await writer.append(chunk)
            }
            // A body sequence may end early rather than throw when its task is cancelled.
            try Task.checkCancellation()
            return try await writer.finish()
        } catch {
            // What arrived before the failure is kept, so a resumed download need not fetch it
            // again; in a task of its own, since a cancelled task's file writes are refused.
            let unfinished = writer
            _ = try? await Task { var rest = unfinished; return try await rest.finish() }.value
            throw error
        }
    }

    /// Keeps the partial file when the server named a validator to resume against; removes
    /// it otherwise, since its bytes could never be safely continued.
    private func keepForResume(_ validator: String?, bytes: Int64, state: ResumeState) {
        guard let validator, bytes > 0 else {
            FileIO.remove(partialPath)
            return
        }
        state.data = ResumeData(
            url: request.urlString,
            partialFile: URL(fileURLWithPath: partialPath),
            destination: destination,
            validator: validator,
            byteCount: bytes
        )
    }

    /// A strong `ETag` or else `Last-Modified`: what `If-Range` accepts (RFC 9110 13.1.5). A
    /// weak ETag cannot be used.
    static func validator(of head: HTTPResponse) -> String? {
        if let etag = head.headerFields[.eTag], !etag.hasPrefix("W/") { return etag }
        return head.headerFields[.lastModified]
    }
}
