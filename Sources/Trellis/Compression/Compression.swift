extension Client.Configuration {
    /// How responses are asked for and read compressed, and how far a compressed body may grow.
    public struct Compression: Sendable {
        /// Whether each request asks for `gzip` and `deflate` (`Accept-Encoding`) and a body
        /// sent that way is decoded, on every transport. A request that sets its own
        /// `Accept-Encoding` gets its body as the server sent it.
        public var decodesResponses: Bool
        /// How many times larger than its compressed bytes a decoded body may grow, once it is
        /// past ``ratioFloor``: past it, the call fails with ``TrellisError/responseTooLarge(_:)``
        /// before the memory or disk is spent (a compression bomb). Ordinary JSON compresses
        /// 5 to 20 times.
        public var maximumRatio: Int
        /// How many decoded bytes a body may have whatever its ratio, so that a small, very
        /// repetitive response is never refused.
        public var ratioFloor: Int

        /// The defaults: responses decoded, at most 250 times their compressed size past 1 MiB.
        public init(decodesResponses: Bool = true, maximumRatio: Int = 250, ratioFloor: Int = 1 << 20) {
            self.decodesResponses = decodesResponses
            self.maximumRatio = max(1, maximumRatio)
            self.ratioFloor = max(0, ratioFloor)
        }
    }
}
