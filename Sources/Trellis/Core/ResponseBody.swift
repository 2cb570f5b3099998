public import Foundation
public import NIOCore

/// The body of a response as it comes off the wire: an asynchronous sequence of byte buffers.
///
/// A streamed body can be iterated once; ``collect(upTo:)`` gathers it into memory and fails
/// rather than exceed the given size. A body that is already in memory (from a mock transport,
/// or replaced by an interceptor) can be read any number of times.
public struct ResponseBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer
    public typealias AsyncIterator = ChunkIterator

    enum Storage: Sendable {
        case bytes(ByteBuffer)
        case stream(@Sendable () -> ChunkIterator)
    }

    let storage: Storage
    /// The length announced by the server (`Content-Length`), when it did.
    public let expectedLength: Int64?

    /// An empty body.
    public init() {
        self.init(ByteBuffer())
    }

    /// A body of the given bytes.
    public init(_ buffer: ByteBuffer) {
        self.storage = .bytes(buffer)
        self.expectedLength = Int64(buffer.readableBytes)
    }

    /// A body of the given data.
    public init(_ data: Data) {
        self.init(ByteBuffer(data: data))
    }

    /// A body of the given text in UTF-8.
    public init(_ text: String) {
        self.init(ByteBuffer(string: text))
    }

    /// A body streamed from a sequence of buffers, iterated at most once.
    public init<Chunks: AsyncSequence & Sendable>(stream: Chunks, expectedLength: Int64?)
    where Chunks.Element == ByteBuffer {
        self.storage = .stream { ChunkIterator(stream) }
        self.expectedLength = expectedLength
    }

    /// A body whose chunks come from a closure that makes the (single) iterator.
    public init(expectedLength: Int64?, makeIterator: @escaping @Sendable () -> ChunkIterator) {
        self.storage = .stream(makeIterator)
        self.expectedLength = expectedLength
    }

    public func makeAsyncIterator() -> ChunkIterator {
        switch storage {
        case .bytes(let buffer): ChunkIterator(single: buffer)
        case .stream(let make): make()
        }
    }

    /// Gathers the whole body into one buffer.
    ///
    /// - Throws: ``TrellisError/responseTooLarge(_:)`` as soon as the announced length or the
    ///   bytes received exceed `maxBytes`, before the memory is spent.
    public func collect(upTo maxBytes: Int) async throws -> ByteBuffer {
        var limit = BodyLimit(maxBytes)
        if case .bytes(let buffer) = storage {
            try limit.announce(Int64(buffer.readableBytes))
            return buffer
        }
        try limit.announce(expectedLength)
        var collected = ByteBuffer()
        for try await var chunk in self {
            try limit.add(chunk.readableBytes)
            // The first chunk is kept as it is, uncopied: a small body comes in one.
            if collected.readableBytes == 0 { collected = chunk } else { collected.writeBuffer(&chunk) }
        }
        return collected
    }

    /// Reads and drops a body nobody wants (a 401 before a replay, a redirect), so the
    /// connection can carry the next request. A large body is abandoned after 1 MiB instead:
    /// closing that connection is cheaper than reading on.
    func discard() async {
        guard case .stream = storage else { return }
        var iterator = makeAsyncIterator()
        var remaining = 1024 * 1024
        while remaining > 0, let chunk = try? await iterator.next() {
            remaining -= chunk.readableBytes
        }
    }
}
