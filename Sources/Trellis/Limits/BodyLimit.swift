/// A buffered body's size held to its limit as it arrives: the one check of a body limit,
/// which every transport and ``ResponseBody/collect(upTo:)`` make through it.
struct BodyLimit {
    let limit: Int
    /// The length the server announced (`Content-Length`), once told.
    private(set) var announcedLength: Int64?
    /// The bytes counted so far.
    private(set) var received = 0

    init(_ limit: Int) {
        self.limit = limit
    }

    /// Takes the length the server announced, if it did.
    ///
    /// - Throws: ``TrellisError/responseTooLarge(_:)`` when it is past the limit, before a
    ///   byte of the body is spent on.
    mutating func announce(_ length: Int64?) throws {
        announcedLength = length
        if let length, length > limit { throw exceeded }
    }

    /// Counts `count` more bytes.
    ///
    /// - Throws: ``TrellisError/responseTooLarge(_:)`` when they take the body past the limit.
    mutating func add(_ count: Int) throws {
        received += count
        if received > limit { throw exceeded }
    }

    private var exceeded: TrellisError {
        .responseTooLarge(ResponseTooLarge(limit: limit, announcedLength: announcedLength))
    }
}
