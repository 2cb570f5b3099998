/// How one request uses the client's ``HTTPCache``.
public enum CachePolicy: Sendable, Equatable {
    /// HTTP's rules (RFC 9111): a fresh stored response is served without the network, a
    /// stale one is revalidated. The default.
    case useCache
    /// The network, whatever is stored; the response is stored for later requests.
    /// Yggdrasil's `ignoreLocalCache`.
    case reload
    /// A stored response, fresh or not, without asking the server; the network when none is
    /// stored.
    case cachedElseLoad
    /// A stored response, fresh or not, or else a `504 Gateway Timeout` made by the cache,
    /// never the network (`only-if-cached`).
    case onlyIfCached
}
