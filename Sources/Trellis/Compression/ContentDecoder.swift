import CompressNIO
import HTTPTypes
import NIOCore

/// Decodes a `gzip` or `deflate` response body as it is read, a window at a time, so that a
/// body that inflates a thousandfold never sits in memory whole, and stops it at the ratio
/// limit.
enum ContentDecoder {
    /// The codings Trellis asks for and decodes.
    static let acceptedEncodings = "gzip, deflate"

    /// The zlib format of a `Content-Encoding` value, or `nil` for one Trellis does not decode
    /// (`br`, `identity`, a list of several).
    static func algorithm(for encoding: String) -> ZlibAlgorithm? {
        switch encoding.trimmingCharacters(in: .whitespaces).lowercased() {
        case "gzip", "x-gzip": .gzip
        // HTTP's "deflate" is the zlib format (RFC 9110 section 8.4.1.2).
        case "deflate": .zlib
        default: nil
        }
    }

    /// How large one decoded chunk may be.
    static let windowSize = 64 * 1024

    /// `body`, decoded.
    static func decoded(
        _ body: ResponseBody,
        algorithm: ZlibAlgorithm,
        limits: Client.Configuration.Compression,
        host: String
    ) -> ResponseBody {
        ResponseBody(expectedLength: nil) {
            var upstream = body.makeAsyncIterator()
            var decompressor: ZlibDecompressor?
            var pending = ByteBuffer()
            var guardrail = RatioGuard(limits: limits)
            var pulled = 0
            var finished = false
            return ChunkIterator {
                guard !finished else { return nil }
                let inflater: ZlibDecompressor
                if let decompressor {
                    inflater = decompressor
                } else {
                    inflater = try ZlibDecompressor(algorithm: algorithm)
                    decompressor = inflater
                }
                while true {
                    if pending.readableBytes == 0 {
                        guard let next = try await upstream.next() else {
                            finished = true
                            try checkEnded(inflater, host: host)
                            return nil
                        }
                        pulled += next.readableBytes
                        pending = next
                        continue
                    }
                    var window = ByteBufferAllocator().buffer(capacity: windowSize)
                    do {
                        try inflater.inflate(from: &pending, to: &window)
                        // A return with input left means the stream ended before it.
                        if pending.readableBytes > 0 {
                            throw failure(host, "there are bytes after the end of the compressed body")
                        }
                    } catch let error as CompressNIOError where error == .bufferOverflow || error == .inputBufferOverflow {
                        // The window is full, or the decoder needs more input: both carry on.
                    } catch let error as CompressNIOError {
                        throw failure(host, "the compressed body is not valid (\(error))")
                    }
                    if window.readableBytes > 0 {
                        // The compressed bytes the decoder has taken, not those received: a
                        // buffered call hands over the whole body at once, and its first
                        // kilobytes may be what inflates a thousandfold.
                        guardrail.encoded = pulled - pending.readableBytes
                        try guardrail.count(window.readableBytes)
                        return window
                    }
                }
            }
        }
    }

    /// A body the transport decoded itself (URLSession does, always): held to the ratio against
    /// the compressed length the server announced, when it did.
    static func guarded(_ body: ResponseBody, announcedLength: Int64?, limits: Client.Configuration.Compression) -> ResponseBody {
        guard let announcedLength else { return ResponseBody(expectedLength: nil, makeIterator: { body.makeAsyncIterator() }) }
        return ResponseBody(expectedLength: nil) {
            var upstream = body.makeAsyncIterator()
            var guardrail = RatioGuard(limits: limits)
            guardrail.encoded = Int(clamping: announcedLength)
            return ChunkIterator {
                guard let chunk = try await upstream.next() else { return nil }
                try guardrail.count(chunk.readableBytes)
                return chunk
            }
        }
    }

    /// Whether the stream reached its end: a body cut short must not pass for a whole one.
    private static func checkEnded(_ inflater: ZlibDecompressor, host: String) throws {
        var empty = ByteBufferAllocator().buffer(capacity: 16)
        var sink = ByteBufferAllocator().buffer(capacity: 16)
        do {
            try inflater.inflate(from: &empty, to: &sink)
        } catch {
            throw failure(host, "the compressed body ended before its end")
        }
    }

    private static func failure(_ host: String, _ reason: String) -> TrellisError {
        TrellisError.connectionFailed(ConnectionFailure(host: host, reason: reason))
    }

    /// Counts a body's compressed and decoded bytes, and refuses a ratio past the limit.
    struct RatioGuard {
        let limits: Client.Configuration.Compression
        var encoded = 0
        var decoded = 0

        mutating func count(_ bytes: Int) throws {
            decoded += bytes
            guard decoded > limits.ratioFloor else { return }
            let allowed = encoded.multipliedReportingOverflow(by: limits.maximumRatio)
            guard !allowed.overflow, decoded > allowed.partialValue else { return }
            throw TrellisError.responseTooLarge(ResponseTooLarge(
                limit: allowed.partialValue,
                announcedLength: nil,
                subject: "the decompressed response body (more than \(limits.maximumRatio) times its \(encoded) compressed bytes)"
            ))
        }
    }
}

