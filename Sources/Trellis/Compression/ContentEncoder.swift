import CompressNIO
import NIOCore

/// Compresses a request body with gzip as it is sent, chunk by chunk.
enum ContentEncoder {
    static func gzipped(_ body: RequestBody) -> RequestBody {
        let make: @Sendable () -> ChunkIterator = {
            var upstream = body.makeChunkIterator()
            var compressor: ZlibCompressor?
            var finished = false
            return ChunkIterator {
                guard !finished else { return nil }
                let deflater: ZlibCompressor
                if let compressor {
                    deflater = compressor
                } else {
                    deflater = try ZlibCompressor(algorithm: .gzip)
                    compressor = deflater
                }
                while var chunk = try await upstream.next() {
                    guard chunk.readableBytes > 0 else { continue }
                    var output = ByteBufferAllocator().buffer(capacity: deflater.maxSize(from: chunk))
                    // The room is zlib's bound for this chunk; should zlib still want more (its
                    // bound is for a stream's start), it gets more rather than leave input
                    // behind: every byte is taken before the next chunk is read.
                    while chunk.readableBytes > 0 {
                        if output.writableBytes == 0 { output.reserveCapacity(minimumWritableBytes: 64 * 1024) }
                        do {
                            try deflater.deflate(from: &chunk, to: &output, flush: .no)
                        } catch let error as CompressNIOError where error == .bufferOverflow {
                            output.reserveCapacity(minimumWritableBytes: 64 * 1024)
                        }
                    }
                    if output.readableBytes > 0 { return output }
                }
                finished = true
                // What zlib still holds, and the gzip trailer, in as many buffers as it takes.
                var ending = ByteBufferAllocator().buffer(capacity: 16)
                var tail = ByteBufferAllocator().buffer(capacity: 64 * 1024)
                while true {
                    var output = ByteBufferAllocator().buffer(capacity: 64 * 1024)
                    do {
                        try deflater.deflate(from: &ending, to: &output, flush: .finish)
                        tail.writeBuffer(&output)
                        return tail
                    } catch let error as CompressNIOError where error == .bufferOverflow {
                        tail.writeBuffer(&output)
                    }
                }
            }
        }
        let storage: RequestBody.Storage = body.isReplayable ? .replayableStream(make) : .stream(make)
        return RequestBody(storage: storage, length: nil, contentType: body.defaultContentType)
    }
}
