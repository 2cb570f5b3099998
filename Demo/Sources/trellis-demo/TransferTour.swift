// The transfer part of the tour: a download to disk and a multipart upload from disk, each
// with a progress bar drawn from the task's progress sequence.
import Foundation
import Hummingbird
import Trellis

@Service
protocol Media {
    @GET("/media/{name}")
    @Download
    func download(name: String) async throws -> DownloadTask

    @POST("/media")
    @Body("form")
    func upload(form: MultipartForm) async throws -> UploadSummary
}

struct UploadSummary: Codable, Sendable {
    var bytes: Int
    var contentType: String
}

/// Serves 24 MiB of generated media, a slice at a time, and counts what is uploaded.
enum MediaRoutes {
    static let size = 24 * 1024 * 1024

    static func install(_ router: Router<BasicRequestContext>) {
        let slice = ByteBuffer(repeating: 0x42, count: 256 * 1024)
        router.get("media/:name") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.eTag: "\"media-1\"", .contentType: "video/mp4"], body: .init(contentLength: size) { writer in
                for _ in 0..<(size / slice.readableBytes) {
                    try await writer.write(slice)
                    // A little pacing so the bar has something to show on a fast machine.
                    try await Task.sleep(for: .milliseconds(8))
                }
                try await writer.finish(nil)
            })
        }
        router.post("media") { request, _ in
            var count = 0
            for try await chunk in request.body { count += chunk.readableBytes }
            return try json(UploadSummary(bytes: count, contentType: request.headers[.contentType] ?? ""))
        }
    }
}

/// Draws `[#####.....]  42%  10.1 of 24.0 MiB` on one terminal line until the transfer ends.
/// When the output is not a terminal (a log, a pipe), carriage returns would pile up on one
/// line, so it prints a line at each quarter instead.
func showProgress(_ label: String, of progress: TransferProgressUpdates) async {
    let width = 30
    let terminal = isatty(STDOUT_FILENO) != 0
    var lastQuarter = -1
    for await update in progress {
        let fraction = update.fractionCompleted ?? 0
        let done = String(format: "%.1f", Double(update.completedBytes) / 1_048_576)
        let total = update.totalBytes.map { String(format: " of %.1f", Double($0) / 1_048_576) } ?? ""
        let percent = String(format: "%3d%%", Int(fraction * 100))
        guard terminal else {
            let quarter = update.isFinished ? 4 : Int(fraction * 4)
            if quarter > lastQuarter {
                lastQuarter = quarter
                print("  \(label) \(percent)  \(done)\(total) MiB")
            }
            continue
        }
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        print("\r  \(label) [\(bar)] \(percent)  \(done)\(total) MiB", terminator: "")
        // Flushes every output stream (standard output among them): the line has no newline.
        fflush(nil)
    }
    if terminal { print() }
}

func transferTour(_ baseURL: URL) async throws {
    let media = MediaService(baseURL: baseURL)

    step("A download streamed to disk, with progress (@Download returning DownloadTask)")
    let task = try await media.download(name: "clip.mp4")
    async let bar: Void = showProgress("download", of: task.progress)
    let file = try await task.value
    await bar
    print("  \(file.byteCount) bytes in \(file.url.lastPathComponent), moved into place when complete")

    step("A multipart upload streamed from that file, with progress")
    var form = MultipartForm()
    form.addField("title", "Clip")
    try form.addFile("video", fileAt: file.url, fileName: "clip.mp4")
    let request = try Trellis.Request(method: .post, url: baseURL.appending(path: "media"))
    let upload = media.client.multipartUploadTask(for: request, form: form, as: UploadSummary.self)
    async let uploadBar: Void = showProgress("upload  ", of: upload.progress)
    let summary = try await upload.value
    await uploadBar
    print("  the server received \(summary.bytes) bytes as \(summary.contentType.prefix(40))…")
    try? FileManager.default.removeItem(at: file.url)
}
