/// The check on the table names the stores are given, which go into their statements as they
/// are (a name cannot be a bound parameter).
enum PostgresTableName {
    /// Whether `name` is letters, digits and underscores, not starting with a digit.
    static func isPlainIdentifier(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
    }
}
