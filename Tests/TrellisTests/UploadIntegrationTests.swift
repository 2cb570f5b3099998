import Foundation
import HTTPTypes
import NIOCore
import Testing
@testable import Trellis

@Service
protocol Transfers {
    @GET("/files/{name}")
    @Download
    func fetch(name: String) async throws -> URL

    @GET("/files/{name}")
    @Download
    func fetchFile(name: String) async throws -> DownloadedFile

    @GET("/files/{name}")
    @Download
    func fetchTask(name: String) async throws -> DownloadTask

    // Snowdrop's spelling, which brings Snowdrop's `_payloadDescription:` as well.
    @POST(url: "/multipart")
    @FileUpload
    @Body("image")
    func uploadImage(_ image: Data) async throws -> [ReceivedPart]

    @POST("/multipart")
    @FileUpload
    @Body("file")
    func uploadFile(file: URL) async throws -> [ReceivedPart]

    @POST("/multipart")
    @Body("form")
    func send(form: MultipartForm) async throws -> [ReceivedPart]

    @POST("/multipart")
    @FileUpload
    @Body("image")
    func uploadAvatar(_ image: JPEGImage) async throws -> [ReceivedPart]
}

/// Snowdrop uploads a `UIImage`; any type can give its bytes as an `UploadableFile`.
struct JPEGImage: UploadableFile {
    let jpeg: Data
    var broken = false

    struct NotEncodable: Error {}

    func uploadData() throws -> Data {
        if broken { throw NotEncodable() }
        return jpeg
    }

    var uploadMIMEType: String? { "image/jpeg" }
    var uploadFileName: String? { "photo.jpeg" }
}

@Suite("Uploads and multipart forms")
struct UploadIntegrationTests {
    static let sizes = [0, 1, 200_000, 64 * 1024 * 1024]

    @Test(arguments: TransportKind.allCases, sizes)
    func aFileUploadIsByteForByteWhatTheServerReceived(_ kind: TransportKind, size: Int) async throws {
        try await withTransferServer { url, _ in
            let blob = Blob(size: size, seed: UInt64(size) + 100)
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let file = directory.appendingPathComponent("upload.png")
                try blob.data.write(to: file)
                let task = try client.uploadTask(
                    for: Request(method: .post, url: url.appending(path: "upload")),
                    fromFile: file,
                    as: ReceivedUpload.self
                )
                let (received, updates) = try await recordingProgress(of: task)
                #expect(received.bytes == size)
                #expect(received.sha256 == blob.sha256)
                #expect(received.contentType == "image/png")
                #expect(received.contentLength == "\(size)")
                #expect(zip(updates, updates.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
                let last = try #require(updates.last)
                #expect(last.isFinished)
                #expect(last.completedBytes == Int64(size))
                #expect(last.totalBytes == Int64(size))
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func dataUploadsSendTheirBytes(_ kind: TransportKind) async throws {
        try await withTransferServer { url, _ in
            let blob = Blob(size: 300_001, seed: 8)
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            let request = try Request(method: .post, url: url.appending(path: "upload"))
            let received = try await client.uploadTask(for: request, from: RequestBody(blob.data), as: ReceivedUpload.self).value
            #expect(received.sha256 == blob.sha256)
            #expect(received.contentType == "application/octet-stream")
            let empty = try await client.uploadTask(for: request, from: RequestBody(Data()), as: ReceivedUpload.self).value
            #expect(empty.bytes == 0)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func theServerParsesEveryFieldFileNameTypeAndByte(_ kind: TransportKind) async throws {
        try await withTransferServer { url, _ in
            let photo = Blob(size: 1024 * 1024 + 5, seed: 77)
            let notes = Blob(size: 1000, seed: 78)
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let photoURL = directory.appendingPathComponent("Ferien \"Süd\".JPG")
                try photo.data.write(to: photoURL)
                var form = MultipartForm()
                form.addField("title", "Grüße aus Köln ✓")
                form.addField("empty", "")
                try form.addFile("photo", fileAt: photoURL)
                form.addData("notes \"draft\"", notes.data, fileName: "notes.txt")
                form.addData("raw", notes.data, fileName: "blob", mimeType: "application/x-custom")
                let task = client.multipartUploadTask(
                    for: try Request(method: .post, url: url.appending(path: "multipart")),
                    form: form,
                    as: [ReceivedPart].self
                )
                let parts = try await task.value
                #expect(parts.count == 5)
                guard parts.count == 5 else { return }
                #expect(parts[0].disposition == "form-data; name=\"title\"")
                #expect(parts[0].text == "Grüße aus Köln ✓")
                #expect(parts[0].contentType == nil)
                #expect(parts[1].bytes == 0)
                #expect(parts[2].disposition == "form-data; name=\"photo\"; filename=\"Ferien %22Süd%22.JPG\"")
                #expect(parts[2].contentType == "image/jpeg")
                #expect(parts[2].sha256 == photo.sha256)
                #expect(parts[2].bytes == photo.bytes.readableBytes)
                #expect(parts[3].disposition == "form-data; name=\"notes %22draft%22\"; filename=\"notes.txt\"")
                #expect(parts[3].contentType == "text/plain; charset=utf-8")
                #expect(parts[3].sha256 == notes.sha256)
                #expect(parts[4].contentType == "application/x-custom")
                #expect(task.progress.current.completedBytes == form.length)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aLargeMultipartFileArrivesWhole(_ kind: TransportKind) async throws {
        try await withTransferServer { url, _ in
            // multipart-kit's parser, in a debug build, takes about a second per MiB on the
            // server; the 64 MiB case is the plain file upload.
            let big = Blob(size: 2 * 1024 * 1024 + 3, seed: 64)
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient }
            try await withScratchDirectory { directory in
                let file = directory.appendingPathComponent("big.bin")
                try big.data.write(to: file)
                let service = TransfersService(client: client)
                let parts = try await service.uploadFile(file: file)
                #expect(parts.count == 1)
                #expect(parts.first?.disposition == "form-data; name=\"file\"; filename=\"big.bin\"")
                #expect(parts.first?.contentType == "application/octet-stream")
                #expect(parts.first?.sha256 == big.sha256)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func fileUploadTakesSnowdropsPayloadDescription(_ kind: TransportKind) async throws {
        try await withTransferServer { url, _ in
            let service = TransfersService(client: Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient })
            let image = Data("not really a png".utf8)
            let described = try await service.uploadImage(
                image,
                _payloadDescription: PayloadDescription(name: "avatar", fileName: "filename.jpeg", mimeType: "image/jpeg")
            )
            #expect(described.first?.disposition == "form-data; name=\"avatar\"; filename=\"filename.jpeg\"")
            #expect(described.first?.contentType == "image/jpeg")
            #expect(described.first?.text == "not really a png")

            let guessed = try await service.uploadImage(image, _payloadDescription: PayloadDescription(name: "avatar", fileName: "me.png"))
            #expect(guessed.first?.contentType == "image/png")

            // Snowdrop 0.1 spells it without the underscore.
            let payload = PayloadDescription(name: "avatar", fileName: "filename.jpeg", mimeType: "image/jpeg")
            let released = try await service.uploadImage(image, payloadDescription: payload)
            #expect(released.first?.disposition == described.first?.disposition)
            let withQuery = try await service.uploadImage(image, payloadDescription: payload, queryItems: [.init(name: "v", value: "2")])
            #expect(withQuery.first?.contentType == "image/jpeg")

            let plain = try await service.uploadImage(image)
            #expect(plain.first?.disposition == "form-data; name=\"image\"; filename=\"image\"")
            #expect(plain.first?.contentType == "application/octet-stream")

            var form = MultipartForm()
            form.addField("a", "1")
            form.addField("b", "2")
            let fields = try await service.send(form: form)
            #expect(fields.map(\.text) == ["1", "2"])
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aFileUploadTakesAnyUploadableFile(_ kind: TransportKind) async throws {
        try await withTransferServer { url, _ in
            let service = TransfersService(client: Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient })
            let image = JPEGImage(jpeg: Data([0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3]))
            let own = try await service.uploadAvatar(image)
            #expect(own.first?.disposition == "form-data; name=\"image\"; filename=\"photo.jpeg\"")
            #expect(own.first?.contentType == "image/jpeg")
            #expect(own.first?.sha256 == Digest.hex(of: ByteBuffer(data: image.jpeg)))

            let described = try await service.uploadAvatar(image, payloadDescription: PayloadDescription(name: "avatar", fileName: "me.jpg"))
            #expect(described.first?.disposition == "form-data; name=\"avatar\"; filename=\"me.jpg\"")

            let error = await #expect(throws: TrellisError.self) { try await service.uploadAvatar(JPEGImage(jpeg: Data(), broken: true)) }
            guard case .invalidRequest(let problem) = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                return
            }
            #expect(problem.reason.contains("'image'"))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func downloadEndpointsReturnAFileAFileRecordOrATask(_ kind: TransportKind) async throws {
        try await withTransferServer { url, shelf in
            let blob = Blob(size: 123_456, seed: 6)
            shelf["photo.jpg"] = blob
            let service = TransfersService(client: Client(baseURL: url, transport: kind.transport) { $0.timeouts = .patient })
            let fileURL = try await service.fetch(name: "photo.jpg")
            defer { try? FileManager.default.removeItem(at: fileURL) }
            #expect(try Digest.hex(ofFile: fileURL) == blob.sha256)

            let record = try await service.fetchFile(name: "photo.jpg")
            defer { try? FileManager.default.removeItem(at: record.url) }
            #expect(record.byteCount == 123_456)

            let task = try await service.fetchTask(name: "photo.jpg")
            #expect(task.progress.current.completedBytes == 0)
            let fromTask = try await task.value
            defer { try? FileManager.default.removeItem(at: fromTask.url) }
            #expect(try Digest.hex(ofFile: fromTask.url) == blob.sha256)
            #expect(task.progress.current.isFinished)
        }
    }

    @Test func aMissingFileFailsBeforeAnythingIsSent() async throws {
        var form = MultipartForm()
        let error = #expect(throws: TrellisError.self) {
            try form.addFile("f", fileAt: URL(fileURLWithPath: "/nonexistent/\(UUID().uuidString)"))
        }
        guard case .fileFailed(let failure) = error else {
            Issue.record("expected fileFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.reason.contains("No such file"))
        #expect(throws: TrellisError.self) { try RequestBody(fileAt: URL(fileURLWithPath: "/")) }
    }

    @Test func theEncodedFormHasItsAnnouncedLength() async throws {
        var form = try MultipartForm(boundary: "XyZ")
        form.addField("a", "1")
        form.addData("f", Data([0, 1, 2]), fileName: "x.bin")
        let encoded = try await form.encoded()
        #expect(Int64(encoded.count) == form.length)
        let expected = "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
            + "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        #expect(encoded.prefix(expected.utf8.count) == Data(expected.utf8))
        #expect(encoded.suffix(14) == Data([0, 1, 2]) + Data("\r\n--XyZ--\r\n".utf8))
        #expect(throws: TrellisError.self) { try MultipartForm(boundary: "has space") }

        // Media types from names, including one that makes Foundation's pathExtension trap on
        // Linux (found by the fuzzer).
        #expect(MIMEType.forFileName("Holiday.JPG") == "image/jpeg")
        #expect(MIMEType.forFileName("/tmp/archive.tar.gz") == "application/gzip")
        #expect(MIMEType.forFileName(".profile") == "application/octet-stream")
        #expect(MIMEType.forFileName("notes.") == "application/octet-stream")
        #expect(MIMEType.forFileName(String(repeating: "/", count: 61) + "z" + String(repeating: "/", count: 50)) == "application/octet-stream")

        // A media type cannot add header lines, and loses the blanks around it.
        var injected = try MultipartForm(boundary: "b")
        injected.addData("f", Data(), fileName: "x", mimeType: " text/plain\r\nX-Injected: 1 ")
        let head = String(decoding: try await injected.encoded(), as: UTF8.self)
        #expect(head.contains("\r\nContent-Type: text/plainX-Injected: 1\r\n\r\n"))
        #expect(MultipartForm().boundary != MultipartForm().boundary)
    }
}
