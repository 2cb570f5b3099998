/// An endpoint path such as `/posts/{id=1}/comments?sort=new`, taken apart at compile time so
/// that the generated code only concatenates and the runtime never parses a template.
struct PathTemplate: Equatable {
    enum Part: Equatable {
        case literal(String)
        case placeholder(name: String, defaultValue: String?)
    }

    var parts: [Part]
    /// The static query, without `?`.
    var query: String

    var placeholders: [(name: String, defaultValue: String?)] {
        parts.compactMap {
            if case .placeholder(let name, let defaultValue) = $0 { return (name, defaultValue) }
            return nil
        }
    }

    struct Problem: Error, Equatable {
        let message: String
    }

    static func parse(_ text: String) -> Result<PathTemplate, Problem> {
        if text.contains("://") || text.hasPrefix("//") {
            return .failure(Problem(message: "the path must be relative to the base URL, not an absolute URL (\"\(text)\")"))
        }
        if text.contains("#") {
            return .failure(Problem(message: "the path must not contain a fragment ('#')"))
        }
        var pathText = Substring(text)
        var query = ""
        if let mark = text.firstIndex(of: "?") {
            pathText = text[..<mark]
            query = String(text[text.index(after: mark)...])
            if query.contains("{") || query.contains("}") {
                return .failure(Problem(message: "placeholders are only allowed in the path, not in the query; add the value as a parameter instead"))
            }
            if let bad = firstInvalid(in: query, allowing: "/?") {
                return .failure(bad)
            }
        }
        var parts: [Part] = []
        var literal = ""
        var seen: Set<String> = []
        var index = pathText.startIndex
        while index < pathText.endIndex {
            let character = pathText[index]
            if character == "}" {
                return .failure(Problem(message: "'}' without a matching '{' in the path"))
            }
            guard character == "{" else {
                literal.append(character)
                index = pathText.index(after: index)
                continue
            }
            guard let close = pathText[index...].firstIndex(of: "}") else {
                return .failure(Problem(message: "'{' without a matching '}' in the path"))
            }
            let inside = pathText[pathText.index(after: index)..<close]
            if inside.contains("{") {
                return .failure(Problem(message: "placeholders cannot be nested"))
            }
            let name: Substring
            var defaultValue: String?
            if let equals = inside.firstIndex(of: "=") {
                name = inside[..<equals]
                defaultValue = String(inside[inside.index(after: equals)...])
                if defaultValue?.isEmpty == true {
                    return .failure(Problem(message: "the placeholder {\(name)=} has an empty default value"))
                }
            } else {
                name = inside
            }
            guard isIdentifier(name) else {
                return .failure(Problem(message: "\"{\(inside)}\" is not a valid placeholder: the name must be a Swift identifier"))
            }
            guard seen.insert(String(name)).inserted else {
                return .failure(Problem(message: "the placeholder {\(name)} appears more than once"))
            }
            if let bad = firstInvalid(in: literal, allowing: "/") { return .failure(bad) }
            if !literal.isEmpty { parts.append(.literal(literal)) }
            literal = ""
            parts.append(.placeholder(name: String(name), defaultValue: defaultValue))
            index = pathText.index(after: close)
        }
        if let bad = firstInvalid(in: literal, allowing: "/") { return .failure(bad) }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        if case .literal(let first) = parts.first, first.hasPrefix("/") {
        } else {
            parts.insert(.literal("/"), at: 0)
        }
        return .success(PathTemplate(parts: mergeLiterals(parts), query: query))
    }

    private static func mergeLiterals(_ parts: [Part]) -> [Part] {
        var merged: [Part] = []
        for part in parts {
            if case .literal(let text) = part, case .literal(let previous)? = merged.last {
                merged[merged.count - 1] = .literal(previous + text)
            } else {
                merged.append(part)
            }
        }
        return merged
    }

    static func isIdentifier(_ text: Substring) -> Bool {
        guard let first = text.first, first == "_" || first.isLetter else { return false }
        return text.allSatisfy { $0 == "_" || $0.isLetter || $0.isNumber }
    }

    /// RFC 3986 path characters: unreserved, sub-delimiters, ':' and '@', and valid '%XX'.
    private static func firstInvalid(in text: String, allowing extra: String) -> Problem? {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@" + extra)
        let hex = Set("0123456789abcdefABCDEF")
        var characters = Array(text)[...]
        while let character = characters.popFirst() {
            if character == "%" {
                guard characters.count >= 2, hex.contains(characters[characters.startIndex]),
                    hex.contains(characters[characters.startIndex + 1])
                else {
                    return Problem(message: "'%' must start a percent-encoded byte such as %20")
                }
                continue
            }
            if !allowed.contains(character) {
                let shown = character == " " ? "a space" : "'\(character)'"
                return Problem(message: "the path contains \(shown), which is not allowed in a URL; percent-encode it")
            }
        }
        return nil
    }
}
