public import Foundation
public import NIOCore

/// The body of a ``Request``.
///
/// Bodies built from bytes in memory, from a file, or from a ``MultipartForm`` are replayable: a
/// retry or a token refresh may send them again. A body built from an asynchronous sequence is
/// one-shot and is never replayed.
public struct RequestBody: Sendable {
    enum Storage: Sendable {
        case bytes(ByteBuffer)
        case stream(@Sendable () -> ChunkIterator)
        /// Read afresh from its source each time it is sent: a file, or a form of files.
        case replayableStream(@Sendable () -> ChunkIterator)
    }

    let storage: Storage
    /// The length in bytes, when it is known before sending.
    public let length: Int64?

    /// The value for `Content-Type` this body asks for when the request has none.
    public var defaultContentType: String?

    /// Whether this body can be sent more than once.
    public var isReplayable: Bool {
        if case .stream = storage { return false }
        return true
    }

    /// A body of the given bytes.
    public init(_ buffer: ByteBuffer, contentType: String? = nil) {
        self.storage = .bytes(buffer)
        self.length = Int64(buffer.readableBytes)
        self.defaultContentType = contentType
    }

    /// A body of the given data, sent as `application/octet-stream` unless the request says
    /// otherwise.
    public init(_ data: Data, contentType: String? = "application/octet-stream") {
        self.init(ByteBuffer(data: data), contentType: contentType)
    }

    /// A body of the given text in UTF-8, sent as `text/plain; charset=utf-8` unless the
    /// request says otherwise.
    public init(_ text: String, contentType: String? = "text/plain; charset=utf-8") {
        self.init(ByteBuffer(string: text), contentType: contentType)
    }

    /// A one-shot body streamed from an asynchronous sequence of byte buffers.
    ///
    /// - Parameters:
    ///   - stream: the buffers, read once as the request is sent.
    ///   - length: the total length when known, so the request can carry
    ///     `Content-Length` instead of being chunked.
    ///   - contentType: sent as `Content-Type` unless the request sets its own.
    public init<Chunks: AsyncSequence & Sendable>(
        stream: Chunks,
        length: Int64? = nil,
        contentType: String? = "application/octet-stream"
    ) where Chunks.Element == ByteBuffer {
        self.storage = .stream { ChunkIterator(stream) }
        self.length = length
        self.defaultContentType = contentType
    }

    /// A body streamed from the chunks `makeChunks` makes afresh each time the body is sent,
    /// so that a retry or a token refresh can send it again, as a file body is.
    ///
    /// - Parameters:
    ///   - length: the total length when known, so the request can carry `Content-Length`.
    ///   - contentType: sent as `Content-Type` unless the request sets its own.
    ///   - makeChunks: called once for each sending, from the first byte.
    public init(
        length: Int64?,
        contentType: String? = "application/octet-stream",
        replayingChunks makeChunks: @escaping @Sendable () -> ChunkIterator
    ) {
        self.init(storage: .replayableStream(makeChunks), length: length, contentType: contentType)
    }

    init(storage: Storage, length: Int64?, contentType: String?) {
        self.storage = storage
        self.length = length
        self.defaultContentType = contentType
    }

    /// The bytes of a body held in memory; `nil` for a streamed body.
    public var bytes: ByteBuffer? {
        if case .bytes(let buffer) = storage { return buffer }
        return nil
    }

    /// Iterates the body's chunks from the start.
    public func makeChunkIterator() -> ChunkIterator {
        switch storage {
        case .bytes(let buffer): ChunkIterator(single: buffer)
        case .stream(let make), .replayableStream(let make): make()
        }
    }

    /// The same body, with `observe` told how many bytes the transport has taken so far each
    /// time it takes a chunk; the count starts again from zero when the body is sent again.
    func observingChunks(_ observe: @escaping @Sendable (Int64) -> Void) -> RequestBody {
        let make: @Sendable () -> ChunkIterator = {
            var inner = self.makeChunkIterator()
            var taken: Int64 = 0
            return ChunkIterator {
                let chunk = try await inner.next()
                if let chunk {
                    taken += Int64(chunk.readableBytes)
                    observe(taken)
                }
                return chunk
            }
        }
        let storage: Storage = isReplayable ? .replayableStream(make) : .stream(make)
        return RequestBody(storage: storage, length: length, contentType: defaultContentType)
    }
}

/// A type-erased iterator over byte buffers, shared by request and response bodies so that
/// transports see one shape whatever the source.
public struct ChunkIterator: AsyncIteratorProtocol {
    private var nextChunk: () async throws -> ByteBuffer?

    /// Wraps an asynchronous sequence of buffers.
    public init<Chunks: AsyncSequence>(_ chunks: Chunks) where Chunks.Element == ByteBuffer {
        var iterator = chunks.makeAsyncIterator()
        self.nextChunk = { try await iterator.next() }
    }

    /// Yields one buffer, then ends.
    public init(single buffer: ByteBuffer) {
        var pending: ByteBuffer? = buffer
        self.nextChunk = {
            defer { pending = nil }
            return pending
        }
    }

    /// Wraps a closure that returns the next chunk, or `nil` at the end.
    public init(_ next: @escaping () async throws -> ByteBuffer?) {
        self.nextChunk = next
    }

    /// The next chunk, or `nil` at the end.
    public mutating func next() async throws -> ByteBuffer? {
        try await nextChunk()
    }
}
