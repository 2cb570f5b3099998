public import Foundation

// Yggdrasil's task initializers: a task made from a URL, an endpoint or a request value, sent
// through `client` (``Client/shared`` unless given). A task starts when awaited
// (`try await task.value`); Yggdrasil's blocking `.await()` has no counterpart, since blocking
// a thread stalls Swift concurrency.

/// What an upload task sends: bytes in memory, or a file streamed from disk.
public enum UploadSource: Sendable {
    case data(Data)
    case file(URL)
}

/// A multipart upload of one file (Yggdrasil's `MultipartFormDataRequest`): `data` as the form
/// field `dataName`, with the media type `mimeType` (`"jpeg"` is read as `image/jpeg`).
public struct MultipartFormDataRequest: Sendable {
    public var endpoint: any EndpointType
    public var data: Data
    public var mimeType: String
    public var dataName: String

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

extension TransferTask where Success: Decodable {
    /// A `GET` of `url`, its body decoded as `Success` (`DataTask<Data>(url:)`).
    public init(url: String, client: Client = .shared) {
        self.init(making: { try Request(url: url) }) { client.dataTask(for: $0, as: Success.self) }
    }

    /// The request `endpoint` describes, its body decoded as `Success`.
    public init(endpoint: some EndpointType, client: Client = .shared) {
        self.init(making: { try Request(endpoint: endpoint) }) { client.dataTask(for: $0, as: Success.self) }
    }

    /// A `POST` of `dataToUpload` to `url`, the response decoded as `Success`
    /// (`UploadTask<JSONDictionary>(url:dataToUpload:)`).
    public init(url: String, dataToUpload: UploadSource, client: Client = .shared) {
        self.init(making: {
            var request = try Request(url: url)
            request.method = .post
            return request
        }) { request in
            switch dataToUpload {
            case .data(let data): return client.uploadTask(for: request, from: RequestBody(data), as: Success.self)
            case .file(let file):
                do {
                    return try client.uploadTask(for: request, fromFile: file, as: Success.self)
                } catch {
                    return TransferTask { _ in throw error }
                }
            }
        }
    }

    /// The multipart upload `request` describes (`MultipartFormDataUploadTask<Data>(request:)`).
    public init(request: MultipartFormDataRequest, client: Client = .shared) {
        self.init(making: { try Request(endpoint: request.endpoint) }) { outgoing in
            var form = MultipartForm()
            form.addData(request.dataName, request.data, fileName: request.dataName, mimeType: request.mediaType)
            return client.multipartUploadTask(for: outgoing, form: form, as: Success.self)
        }
    }

    /// A task made by `task` for the request `make` builds, or one that fails with the
    /// error of building it when it is awaited, as a task of Yggdrasil's would.
    private init(making make: () throws -> Request, _ task: (Request) -> TransferTask<Success>) {
        do {
            self = task(try make())
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
