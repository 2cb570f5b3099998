import HTTPTypes

/// `Content-Range: bytes 100-199/1000` (RFC 9110 14.4); the total is `nil` for `*`.
struct ContentRange: Equatable {
    let start: Int64
    let end: Int64
    let total: Int64?

    init?(_ value: String?) {
        guard let value, value.hasPrefix("bytes ") else { return nil }
        let spec = value.dropFirst("bytes ".count)
        let halves = spec.split(separator: "/", maxSplits: 1)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", maxSplits: 1)
        // Digits only (no sign), and an end short of the largest Int64, so that the length
        // `end - start + 1` can always be computed.
        guard bounds.count == 2, let start = Self.number(bounds[0]), let end = Self.number(bounds[1]), start <= end, end < Int64.max
        else { return nil }
        self.start = start
        self.end = end
        if halves[1] == "*" {
            self.total = nil
        } else {
            guard let total = Self.number(halves[1]), total > end else { return nil }
            self.total = total
        }
    }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return Int64(text)
    }
}

/// A single range asked for with `Range: bytes=first-last` or `bytes=first-` (RFC 9110 14.2).
struct ByteRangeRequest: Equatable {
    let first: Int64
    let last: Int64?

    init?(_ value: String?) {
        guard let value, value.hasPrefix("bytes="), !value.contains(",") else { return nil }
        let bounds = value.dropFirst("bytes=".count).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(bounds[0]) else { return nil }
        if bounds[1].isEmpty {
            last = nil
        } else {
            guard let last = Int64(bounds[1]), last >= first else { return nil }
            self.last = last
        }
        self.first = first
    }

    /// Whether `range` is what was asked for: it starts where asked and ends no later.
    func isAnswered(by range: ContentRange) -> Bool {
        range.start == first && (last.map { range.end <= $0 } ?? true)
    }
}
