import HTTPTypes
import NIOCore
import OpenAPIRuntime
import Trellis

/// Bodies between swift-openapi-runtime's `HTTPBody` (chunks of `ArraySlice<UInt8>`) and
/// Trellis's bodies (chunks of `ByteBuffer`). Each chunk is copied once, as every
/// `ClientTransport` over SwiftNIO does; a stream stays a stream.
enum BodyConversion {
    /// Bodies up to this size that can be read more than once are gathered into one buffer:
    /// a generated client's JSON body is a single chunk in memory, and a buffer is sent
    /// without the per-chunk hops of a stream.
    static let gatheredSize = 64 * 1024

    static func requestBody(_ body: HTTPBody, contentType: String?) async throws -> RequestBody {
        let length: Int64? = switch body.length {
        case .known(let count): count
        case .unknown: nil
        }
        switch body.iterationBehavior {
        case .multiple:
            if let length, length <= gatheredSize {
                var buffer = ByteBuffer()
                buffer.reserveCapacity(Int(length))
                for try await chunk in body { buffer.writeBytes(chunk) }
                return RequestBody(buffer, contentType: contentType)
            }
            return RequestBody(length: length, contentType: contentType) { chunks(of: body) }
        case .single:
            return RequestBody(stream: ChunkSequence(body: body), length: length, contentType: contentType)
        }
    }

    private static func chunks(of body: HTTPBody) -> ChunkIterator {
        var iterator = body.makeAsyncIterator()
        return ChunkIterator {
            guard let chunk = try await iterator.next() else { return nil }
            return ByteBuffer(bytes: chunk)
        }
    }

    /// A one-shot body as the `AsyncSequence` of buffers `RequestBody(stream:)` takes.
    private struct ChunkSequence: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let body: HTTPBody
        func makeAsyncIterator() -> ChunkIterator { BodyConversion.chunks(of: body) }
    }

    /// A streamed response body for the generated client, chunk by chunk as it arrives.
    static func streamedResponseBody(_ body: ResponseBody) -> HTTPBody {
        let length: HTTPBody.Length = body.expectedLength.map { .known($0) } ?? .unknown
        return HTTPBody(body.map { ArraySlice($0.readableBytesView) }, length: length, iterationBehavior: .single)
    }
}
