import Foundation

/// The Public Suffix List's answer to whether a domain is one under which anyone may register
/// a name (`com`, `co.uk`, `github.io`): a cookie may not name such a domain in its `Domain`
/// attribute, or `a.co.uk` could set one that `b.co.uk` receives (RFC 6265 section 5.3,
/// step 5).
///
/// The rules ship as a resource of the library, `PublicSuffixList.txt`, sorted (see
/// `Scripts/generate-public-suffixes`), read on first use; a lookup is a binary search of their
/// text. A list that cannot be read (an app deployed without the library's resources) makes
/// every domain a suffix: a cookie then keeps to the host that set it, which loses nothing to
/// another site, and ``unreadable`` says why.
struct PublicSuffixes: Sendable, CustomStringConvertible {
    /// The list the library ships, read the first time a cookie names a domain.
    static let list = PublicSuffixes(contentsOf: resourceCandidates())

    /// The name of the resource file.
    static let fileName = "PublicSuffixList.txt"

    private let bytes: [UInt8]
    /// Where each rule starts in `bytes`, then one past the end of the text and its missing
    /// final newline, so that rule `i` ends one byte before `starts[i + 1]`.
    private let starts: [Int]

    /// Why the list could not be read, when it could not: then every domain counts as a suffix.
    let unreadable: String?

    /// Rules in ASCII, one per line, sorted by their bytes: `co.uk`, `*.ck` (every child of
    /// `ck`), `!www.ck` (a child that is not a suffix after all).
    init(sortedRules: String) {
        self.init(sortedRules: Array(sortedRules.utf8))
    }

    private init(sortedRules bytes: [UInt8], unreadable: String? = nil) {
        var starts = [0]
        starts.reserveCapacity(bytes.count / 8)
        for (offset, byte) in bytes.enumerated() where byte == UInt8(ascii: "\n") {
            starts.append(offset + 1)
        }
        starts.append(bytes.count + 1)
        self.bytes = bytes
        self.starts = starts
        self.unreadable = unreadable
    }

    /// The rules of the first of `files` that can be read, its leading `//` lines left out.
    init(contentsOf files: [URL]) {
        for file in files {
            guard let data = try? Data(contentsOf: file) else { continue }
            var bytes = Array(data)
            var start = 0
            while bytes[start...].starts(with: "//".utf8), let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
                start = newline + 1
            }
            if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            guard start < bytes.count else { break }
            self.init(sortedRules: Array(bytes[start...]))
            return
        }
        self.init(
            sortedRules: [],
            unreadable: "the Public Suffix List (\(Self.fileName)) was not found at \(files.map(\.path).joined(separator: ", ")) or is empty"
        )
    }

    /// Where the list may be: SwiftPM's resources beside the program on Linux (where an app or
    /// a test runner finds them), the target's bundle on Apple platforms.
    ///
    /// On Linux, `Bundle.module` stops the program when the resources are missing, and servers
    /// are often deployed as one executable without them: the place is looked at here, and a
    /// missing list costs only cookies wider than their host. Apple's builds always copy the bundle.
    private static func resourceCandidates() -> [URL] {
        #if canImport(Darwin)
        [Bundle.module.url(forResource: fileName, withExtension: nil)].compactMap { $0 }
        #else
        [Bundle.main.bundleURL.appending(path: "Trellis_Trellis.resources").appending(path: fileName)]
        #endif
    }

    /// The list's size rather than its thousands of rules, for test failures and debuggers.
    var description: String { unreadable.map { "PublicSuffixes(unreadable: \($0))" } ?? "PublicSuffixes(\(starts.count - 1) rules)" }

    /// Whether `domain` (lowercased, in ASCII, without a trailing dot) is a public suffix.
    /// Every single-label name is one (the list's implicit `*` rule).
    func contains(_ domain: String) -> Bool {
        if unreadable != nil { return true }
        if has(rule: "!" + domain) { return false }
        if has(rule: domain) { return true }
        guard let dot = domain.firstIndex(of: ".") else { return true }
        return has(rule: "*" + domain[dot...])
    }

    private func has(rule: String) -> Bool {
        let key = Array(rule.utf8)
        var low = 0
        var high = starts.count - 1
        while low < high {
            let middle = (low + high) / 2
            let candidate = bytes[starts[middle]..<(starts[middle + 1] - 1)]
            if candidate.elementsEqual(key) { return true }
            if candidate.lexicographicallyPrecedes(key) { low = middle + 1 } else { high = middle }
        }
        return false
    }
}
