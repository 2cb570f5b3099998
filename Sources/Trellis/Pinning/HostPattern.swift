import Foundation

enum HostPattern {
    static func validate(_ pattern: String) throws {
        var rest = Substring(pattern)
        if rest.hasPrefix("**.") {
            rest = rest.dropFirst(3)
        } else if rest.hasPrefix("*.") {
            rest = rest.dropFirst(2)
        }
        // One colon is a port; an IPv6 address has several.
        let hasPort = rest.filter { $0 == ":" }.count == 1
        guard !rest.isEmpty, !rest.contains("*"), !rest.contains("/"), !hasPort,
            !rest.hasPrefix("."), !rest.hasSuffix("."), !rest.contains("..")
        else {
            throw InvalidPin(
                "\(pattern) is not a host pattern (write api.example.com, *.example.com or **.example.com, without scheme or port)"
            )
        }
    }

    /// A pattern in the form hosts are compared in (``CanonicalHost``): the wildcard kept, the
    /// rest canonical.
    static func canonical(_ pattern: String) -> String {
        for wildcard in ["**.", "*."] where pattern.hasPrefix(wildcard) {
            return wildcard + CanonicalHost.form(String(pattern.dropFirst(wildcard.count)))
        }
        return CanonicalHost.form(pattern)
    }

    /// Whether `host` (canonical) matches `pattern` (canonical).
    static func matches(_ pattern: String, host: String) -> Bool {
        if pattern.hasPrefix("**.") {
            let suffix = pattern.dropFirst(2)
            return host.hasSuffix(suffix) && host.count > suffix.count
        }
        if pattern.hasPrefix("*.") {
            let suffix = pattern.dropFirst(1)
            guard host.hasSuffix(suffix) else { return false }
            let label = host.dropLast(suffix.count)
            return !label.isEmpty && !label.contains(".")
        }
        return pattern == host
    }
}
