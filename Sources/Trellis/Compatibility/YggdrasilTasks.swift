public import Foundation

// Yggdrasil's task initializers: a task made from a URL, an endpoint or a request value, sent
// through `client` (``Client/shared`` unless given). A task starts when awaited
// (`try await task.value`); Yggdrasil's blocking `.await()` has no counterpart, since blocking
// a thread stalls Swift concurrency.

/// What an upload task sends: bytes in memory, or a file streamed from disk.
public enum UploadSource: Sendable {
    /// These bytes.
    case data(Data)
    /// The file at this URL, streamed from disk.
    case file(URL)
}

/// A multipart upload of one file (Yggdrasil's `MultipartFormDataRequest`): `data` as the form
/// field `dataName`, with the media type `mimeType` (`"jpeg"` is read as `image/jpeg`).
public struct MultipartFormDataRequest: Sendable {
    /// The endpoint the form is posted to.
    public var endpoint: any EndpointType
    /// The file's bytes.
    public var data: Data
    /// Its media type, or a file extension (`"jpeg"`) that names one.
    public var mimeType: String
    /// The form field that carries it.
    public var dataName: String

    /// `data` as the form field `dataName` with the media type `mimeType`, posted to `endpoint`.
    public init(endpoint: any EndpointType, data: Data, mimeType: String, dataName: String) {
        self.endpoint = endpoint
        self.data = data
        self.mimeType = mimeType
        self.dataName = dataName
    }

    /// `jpeg` → `image/jpeg`; a full type is kept as it is.
    var mediaType: String {
        mimeType.contains("/") ? mimeType : MIMEType.forFileName("file." + mimeType)
    }
}

/// Yggdrasil's name for a multipart upload task.
public typealias MultipartFormDataUploadTask<Value: Sendable> = TransferTask<Value>

// Yggdrasil's task types take a `Parsable` type parameter, and Trellis's a `Decodable` one too:
// one set of initializers for each, the body shared in `TransferTask.init(_:client:reading:)`.

extension TransferTask where Success: Decodable {
    /// A `GET` of `url`, its body decoded as `Success` (`DataTask<Data>(url:)`).
    public init(url: String, client: Client = .shared) {
        self.init(.url(url), client: client, reading: .decoded)
    }

    /// The request `endpoint` describes, its body decoded as `Success`.
    public init(endpoint: some EndpointType, client: Client = .shared) {
        self.init(.endpoint(endpoint), client: client, reading: .decoded)
    }

    /// A `POST` of `dataToUpload` to `url`, the response decoded as `Success`
    /// (`UploadTask<JSONDictionary>(url:dataToUpload:)`).
    public init(url: String, dataToUpload: UploadSource, client: Client = .shared) {
        self.init(.upload(url, dataToUpload), client: client, reading: .decoded)
    }

    /// The multipart upload `request` describes (`MultipartFormDataUploadTask<Data>(request:)`).
    public init(request: MultipartFormDataRequest, client: Client = .shared) {
        self.init(.multipart(request), client: client, reading: .decoded)
    }
}

extension TransferTask where Success: Parsable {
    /// A `GET` of `url`, its body made by `Success.parseData(_:)` (`DataTask<Image>(url:)`).
    public init(url: String, client: Client = .shared) {
        self.init(.url(url), client: client, reading: .parsed)
    }

    /// The request `endpoint` describes, its body made by `Success.parseData(_:)`.
    public init(endpoint: some EndpointType, client: Client = .shared) {
        self.init(.endpoint(endpoint), client: client, reading: .parsed)
    }

    /// A `POST` of `dataToUpload` to `url`, the response made by `Success.parseData(_:)`.
    public init(url: String, dataToUpload: UploadSource, client: Client = .shared) {
        self.init(.upload(url, dataToUpload), client: client, reading: .parsed)
    }

    /// The multipart upload `request` describes, the response made by `Success.parseData(_:)`.
    public init(request: MultipartFormDataRequest, client: Client = .shared) {
        self.init(.multipart(request), client: client, reading: .parsed)
    }
}

extension TransferTask where Success: Decodable & Parsable {
    /// As for a ``Parsable`` type: adopting `Parsable` asks for `parseData(_:)`.
    public init(url: String, client: Client = .shared) {
        self.init(.url(url), client: client, reading: .parsed)
    }

    /// As for a ``Parsable`` type.
    public init(endpoint: some EndpointType, client: Client = .shared) {
        self.init(.endpoint(endpoint), client: client, reading: .parsed)
    }

    /// As for a ``Parsable`` type.
    public init(url: String, dataToUpload: UploadSource, client: Client = .shared) {
        self.init(.upload(url, dataToUpload), client: client, reading: .parsed)
    }

    /// As for a ``Parsable`` type.
    public init(request: MultipartFormDataRequest, client: Client = .shared) {
        self.init(.multipart(request), client: client, reading: .parsed)
    }
}

/// What a Yggdrasil task sends.
enum TaskSource {
    case url(String)
    case endpoint(any EndpointType)
    case upload(String, UploadSource)
    case multipart(MultipartFormDataRequest)
}

extension TransferTask {
    /// The task for `source`, or one that fails with the error of building its request when
    /// it is awaited, as a task of Yggdrasil's would.
    init(_ source: TaskSource, client: Client, reading: BodyReading<Success>) {
        do {
            switch source {
            case .url(let url):
                self = client.dataTask(for: try Request(url: url), reading: reading)
            case .endpoint(let endpoint):
                self = client.dataTask(for: try Request(endpoint: endpoint), reading: reading)
            case .upload(let url, let upload):
                var request = try Request(url: url)
                request.method = .post
                switch upload {
                case .data(let data): self = client.uploadTask(for: request, from: RequestBody(data), reading: reading)
                case .file(let file): self = client.uploadTask(for: request, from: try RequestBody(fileAt: file), reading: reading)
                }
            case .multipart(let multipart):
                var form = MultipartForm()
                form.addData(multipart.dataName, multipart.data, fileName: multipart.dataName, mimeType: multipart.mediaType)
                self = client.multipartUploadTask(for: try Request(endpoint: multipart.endpoint), form: form, reading: reading)
            }
        } catch {
            self.init { _ in throw error }
        }
    }
}

extension TransferTask where Success == DownloadedFile {
    /// A download of `url` to `downloadDestination`, or to a new temporary file
    /// (`DownloadTask(url:)`, `DownloadTask(url:downloadDestination:)`).
    public init(url: String, downloadDestination: URL? = nil, client: Client = .shared) {
        do {
            self = client.downloadTask(for: try Request(url: url), to: downloadDestination)
        } catch {
            self.init { _ in throw error }
        }
    }
}

extension Dictionary {
    /// Runs every task, at most `maxConcurrency` at a time, and returns their values under the
    /// same keys (Yggdrasil's `awaitAll()` on a dictionary). The first failure cancels the rest
    /// and is thrown.
    public func awaitAll<Success: Sendable>(maxConcurrency: Int = 4) async throws -> [Key: Success]
    where Value == TransferTask<Success>, Key: Sendable {
        let keys = Array(self.keys)
        let values = try await keys.map { self[$0]! }.awaitAll(maxConcurrency: maxConcurrency)
        return Dictionary<Key, Success>(uniqueKeysWithValues: zip(keys, values))
    }
}
