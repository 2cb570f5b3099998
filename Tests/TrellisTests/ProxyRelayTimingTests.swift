#if os(Linux)
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
@testable import Trellis

/// When a connection through a proxy acknowledges what it read at once (`TCP_QUICKACK`): only
/// after a batch of reads that left an answer unfinished. The delay it avoids is measured in
/// the `proxy` benchmarks; here, which batches ask for it.
@Suite("Quick acknowledgements through a proxy")
struct ProxyRelayTimingTests {
    @Test func onlyABatchThatLeavesAnAnswerUnfinishedIsAcknowledgedAtOnce() throws {
        let acknowledged = Counter()
        let channel = EmbeddedChannel(handler: ProxyRelayTiming.AcknowledgementsWithinAnAnswer { _ in acknowledged.count += 1 })
        let head = HTTPClientResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok))
        let body = HTTPClientResponsePart.body(ByteBuffer(string: "part"))

        // A small answer, whole in one batch: the next request carries the acknowledgement.
        channel.pipeline.fireChannelRead(head)
        channel.pipeline.fireChannelRead(body)
        channel.pipeline.fireChannelRead(HTTPClientResponsePart.end(nil))
        channel.pipeline.fireChannelReadComplete()
        #expect(acknowledged.count == 0)

        // A large one, read in three batches: the first two leave it unfinished.
        channel.pipeline.fireChannelRead(head)
        channel.pipeline.fireChannelRead(body)
        channel.pipeline.fireChannelReadComplete()
        #expect(acknowledged.count == 1)
        channel.pipeline.fireChannelRead(body)
        channel.pipeline.fireChannelReadComplete()
        #expect(acknowledged.count == 2)
        channel.pipeline.fireChannelRead(body)
        channel.pipeline.fireChannelRead(HTTPClientResponsePart.end(nil))
        channel.pipeline.fireChannelReadComplete()
        #expect(acknowledged.count == 2)
        _ = try channel.finish()
    }

    /// The embedded channel runs everything on the test's thread.
    private final class Counter {
        var count = 0
    }
}
#endif
