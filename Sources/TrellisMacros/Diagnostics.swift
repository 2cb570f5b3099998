import SwiftDiagnostics

/// A compile-time error (or warning) from Trellis's macros.
struct TrellisDiagnostic: DiagnosticMessage {
    let message: String
    let id: String
    let severity: DiagnosticSeverity

    init(_ id: String, _ message: String, severity: DiagnosticSeverity = .error) {
        self.id = id
        self.message = message
        self.severity = severity
    }

    var diagnosticID: MessageID { MessageID(domain: "Trellis", id: id) }
}

struct TrellisFixIt: FixItMessage {
    let message: String
    var fixItID: MessageID { MessageID(domain: "Trellis", id: message) }

    init(_ message: String) {
        self.message = message
    }
}

enum Similarity {
    /// The candidate closest to `name` by edit distance, if it is close enough to be a typo.
    static func closest(to name: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(name.lowercased(), $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
        return best.1 <= max(2, name.count / 3) ? best.0 : nil
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

extension String {
    /// Every occurrence of `target` replaced (the plugin does not link Foundation).
    func replacing(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var result = ""
        var rest = self[...]
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}
