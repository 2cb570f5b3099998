import Foundation

/// Reads one `Set-Cookie` field value into a ``Cookie`` for the request that received it
/// (RFC 6265 section 5.2 and 5.3), or says why the cookie is refused.
///
/// A field value is input from the network: it is read as browsers read it, bounded, and a
/// cookie the server may not set (another domain, a `Secure` cookie over plain HTTP, a parent domain
/// that is a public suffix) is refused rather than kept.
enum SetCookieParser {
    /// The most bytes of name and value one cookie may have (RFC 6265 section 6.1 asks for
    /// at least 4096).
    static let maximumCookieSize = 4096

    enum Outcome: Equatable {
        case accepted(Cookie)
        case refused(String)
    }

    struct Origin {
        /// Lowercased, without brackets or port.
        var host: String
        var path: String
        var secure: Bool
    }

    /// The `Set-Cookie` values in one field value that a transport folded together
    /// (URLSession's does; ``URLSessionTransport`` unfolds them before anything else reads
    /// them). A field a server sent is one cookie, whatever commas it holds.
    ///
    /// `HTTPURLResponse` joins repeated fields with ", ", which `Set-Cookie` cannot survive
    /// (RFC 9110 section 5.3): a comma followed by a name and `=` starts the next cookie, while
    /// the comma of an `Expires` date (`Wed, 21 Oct …`) does not. A cookie value cannot hold a
    /// comma, so nothing else is split.
    static func unfolded(_ field: String) -> [String] {
        guard field.contains(",") else { return [field] }
        var cookies: [String] = []
        var start = field.startIndex
        var index = field.startIndex
        while let comma = field[index...].firstIndex(of: ",") {
            let rest = field[field.index(after: comma)...].drop { $0 == " " || $0 == "\t" }
            let name = rest.prefix { $0 != "=" && $0 != ";" && $0 != "," && $0 != " " }
            if !name.isEmpty, rest.dropFirst(name.count).first == "=" {
                cookies.append(String(field[start..<comma]))
                start = rest.startIndex
            }
            index = field.index(after: comma)
        }
        cookies.append(String(field[start...]))
        return cookies
    }

    static func parse(_ field: String, from origin: Origin, now: Date) -> Outcome {
        guard field.utf8.count <= maximumCookieSize * 2 else { return .refused("the field is longer than \(maximumCookieSize * 2) bytes") }
        // The user agent's algorithm (RFC 6265 section 5.2), as browsers follow it: the name
        // is what comes before the first `=`, the value what follows, each without the spaces
        // and tabs around it, and neither held to the stricter grammar servers are asked to
        // use (a space, a quote, a comma and UTF-8 are kept as sent).
        var parts = field.fieldParts(separatedBy: ";").makeIterator()
        guard let pair = parts.next(), pair.unicodeScalars.contains("=") else {
            return .refused("it has no name=value pair")
        }
        let halves = pair.fieldParts(separatedBy: "=", maxSplits: 1)
        let name = halves[0].trimmedOfSpacesAndTabs
        let value = halves[1].trimmedOfSpacesAndTabs
        guard !name.isEmpty else { return .refused("its name is empty") }
        guard name.utf8.count + value.utf8.count <= maximumCookieSize else {
            return .refused("its name and value are longer than \(maximumCookieSize) bytes")
        }
        // Control characters never go into a Cookie field (RFC 6265bis section 5.7).
        guard !name.utf8.contains(where: isControl), !value.utf8.contains(where: isControl) else {
            return .refused("its name or value holds a control character")
        }

        var cookie = Cookie(name: name, value: value, domain: origin.host, createdAt: now)
        cookie.path = CookieDomain.defaultPath(of: origin.path)
        var maxAge: Date?
        var expires: Date?
        var domainAttribute: String?
        var pathAttribute: String?
        while let attribute = parts.next() {
            let (key, attributeValue) = split(attribute)
            switch key.lowercased() {
            case "expires":
                // An unreadable date is ignored, as the RFC says.
                if let date = CookieDate.parse(attributeValue) { expires = date }
            case "max-age":
                guard let first = attributeValue.utf8.first, first == UInt8(ascii: "-") || (0x30...0x39).contains(first),
                    attributeValue.dropFirst().allSatisfy(\.isASCIIDigit)
                else { continue }
                let seconds = Int64(attributeValue) ?? (first == UInt8(ascii: "-") ? Int64.min : Int64.max)
                maxAge = seconds <= 0
                    ? Date.distantPast
                    : now.addingTimeInterval(Double(min(seconds, 400 * 86_400)))  // capped at 400 days (RFC 6265bis)
            case "domain":
                var domain = attributeValue.lowercased()
                if domain.hasPrefix(".") { domain.removeFirst() }
                if !domain.isEmpty { domainAttribute = domain }
            case "path":
                // The last one counts; one that is empty or not absolute means the default.
                pathAttribute = attributeValue
                cookie.path = attributeValue.hasPrefix("/") ? attributeValue : CookieDomain.defaultPath(of: origin.path)
            case "secure":
                cookie.isSecure = true
            case "httponly":
                cookie.isHTTPOnly = true
            case "samesite":
                switch attributeValue.lowercased() {
                case "strict": cookie.sameSite = .strict
                case "lax": cookie.sameSite = .lax
                case "none": cookie.sameSite = .unrestricted
                default: break
                }
            default:
                break
            }
        }
        cookie.expiresAt = maxAge ?? expires.map { min($0, now.addingTimeInterval(400 * 86_400)) }

        if let domain = domainAttribute {
            if domain != origin.host {
                guard CookieDomain.domainMatches(host: origin.host, domain: domain) else {
                    return .refused("its Domain \(domain) is not \(origin.host) or a parent of it")
                }
                guard !PublicSuffixes.list.contains(domain) else {
                    if let unreadable = PublicSuffixes.list.unreadable {
                        return .refused("its Domain \(domain) is wider than the host, and \(unreadable), so no wider domain is accepted")
                    }
                    return .refused("its Domain \(domain) is a public suffix, under which anyone may register a name")
                }
                cookie.domain = domain
                cookie.isHostOnly = false
            } else {
                // Naming the host itself widens the cookie to the host's subdomains, but not for
                // an IP address, nor for a host that is itself a public suffix (a site at
                // `github.io`, or a single-label name such as `localhost`): the RFC's step 5
                // drops the attribute then.
                cookie.isHostOnly = CanonicalHost.isIPAddress(origin.host) || PublicSuffixes.list.contains(domain)
            }
        }
        if cookie.isSecure && !origin.secure {
            return .refused("it is Secure but came over plain HTTP")
        }
        // The name prefixes a site uses to know how a cookie was set (RFC 6265bis section
        // 4.1.3), compared without regard to case as browsers do.
        let lowercasedName = name.lowercased()
        if lowercasedName.hasPrefix("__secure-"), !cookie.isSecure {
            return .refused("its name starts with __Secure- but it is not Secure")
        }
        if lowercasedName.hasPrefix("__host-") {
            guard cookie.isSecure, domainAttribute == nil, pathAttribute == "/" else {
                return .refused("its name starts with __Host- but it is not Secure with Path=/ and no Domain")
            }
        }
        return .accepted(cookie)
    }

    private static func split(_ attribute: String) -> (String, String) {
        let halves = attribute.fieldParts(separatedBy: "=", maxSplits: 1)
        return (halves[0].trimmedOfSpacesAndTabs, halves.count > 1 ? halves[1].trimmedOfSpacesAndTabs : "")
    }

    /// A control character other than a tab.
    private static func isControl(_ byte: UInt8) -> Bool {
        (byte < 0x20 && byte != 0x09) || byte == 0x7F
    }
}
