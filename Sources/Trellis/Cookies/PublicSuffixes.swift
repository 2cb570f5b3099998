/// The Public Suffix List's answer to whether a domain is one under which anyone may register
/// a name (`com`, `co.uk`, `github.io`): a cookie may not name such a domain in its `Domain`
/// attribute, or `a.co.uk` could set one that `b.co.uk` receives (RFC 6265 section 5.3,
/// step 5).
///
/// The rules are compiled in (see `Scripts/generate-public-suffixes`) and read into sets the
/// first time a cookie names a domain, so that a client that never meets one pays nothing.
struct PublicSuffixes: Sendable, CustomStringConvertible {
    /// The list as compiled in.
    static let list = PublicSuffixes(rules: Self.rules)

    /// Names that are suffixes themselves (`co.uk`).
    private let exact: Set<Substring>
    /// Names every child of which is a suffix (`ck` for `*.ck`).
    private let childrenOf: Set<Substring>
    /// Children of those that are not suffixes after all (`www.ck` for `!www.ck`).
    private let exceptions: Set<Substring>

    /// The rules of a list, one per line, in ASCII; anything else on a line is ignored.
    init(rules: String) {
        var exact = Set<Substring>()
        var childrenOf = Set<Substring>()
        var exceptions = Set<Substring>()
        for line in rules.split(separator: "\n") {
            guard let rule = line.split(separator: " ", maxSplits: 1).first, !rule.hasPrefix("//") else { continue }
            if rule.hasPrefix("!") {
                exceptions.insert(rule.dropFirst())
            } else if rule.hasPrefix("*.") {
                childrenOf.insert(rule.dropFirst(2))
            } else {
                exact.insert(rule)
            }
        }
        self.exact = exact
        self.childrenOf = childrenOf
        self.exceptions = exceptions
    }

    /// The list's size rather than its thousands of rules, for test failures and debuggers.
    var description: String { "PublicSuffixes(\(exact.count + childrenOf.count + exceptions.count) rules)" }

    /// Whether `domain` (lowercased, in ASCII, without a trailing dot) is a public suffix.
    /// Every single-label name is one (the list's implicit `*` rule).
    func contains(_ domain: String) -> Bool {
        let name = Substring(domain)
        if exceptions.contains(name) { return false }
        if exact.contains(name) { return true }
        guard let dot = name.firstIndex(of: ".") else { return true }
        return childrenOf.contains(name[name.index(after: dot)...])
    }
}
