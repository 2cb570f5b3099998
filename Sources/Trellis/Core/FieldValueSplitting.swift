/// Splitting a header field's value at a delimiter, by Unicode scalars rather than by
/// Characters.
///
/// A `Character` is a grapheme cluster, and some scalars join what follows them into theirs:
/// U+070F, a "prepend" mark, followed by `;` is one `Character`, so a split of the Characters
/// never sees that `;`. A server could hide a delimiter that way: a cookie value carrying
/// `; other=x` into the `Cookie` field, or a `no-store` that a cache would read past. HTTP
/// delimits by bytes, and so does this.
extension StringProtocol {
    /// The parts between each `delimiter`, empty ones included, without trimming.
    func fieldParts(separatedBy delimiter: Unicode.Scalar, maxSplits: Int = .max) -> [String] {
        unicodeScalars.split(separator: delimiter, maxSplits: maxSplits, omittingEmptySubsequences: false)
            .map { String(String.UnicodeScalarView($0)) }
    }

    /// The elements of a comma-separated list, without the spaces and tabs around them, empty
    /// ones left out.
    var fieldListElements: [String] {
        fieldParts(separatedBy: ",").map(\.trimmedOfSpacesAndTabs).filter { !$0.isEmpty }
    }

    /// Without the spaces and tabs at either end (HTTP's OWS), by scalars.
    var trimmedOfSpacesAndTabs: String {
        let scalars = Array(unicodeScalars)
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
            let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })
        else { return "" }
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars[first...last])
        return String(view)
    }
}
