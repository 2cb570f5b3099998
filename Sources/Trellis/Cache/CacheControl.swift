import Foundation
import HTTPTypes

/// The `Cache-Control` directives a private cache acts on (RFC 9111 section 5.2), read
/// leniently: an unknown directive is ignored, a malformed number is taken as absent.
struct CacheControl {
    var maxAge: Int?
    var sharedMaxAge: Int?
    var noStore = false
    /// `no-cache` without a list: the response may not be served without revalidation.
    var noCache = false
    /// The fields `no-cache="…"` names: the response may be served, without them, until it
    /// is revalidated (RFC 9111 section 5.2.2.4).
    var noCacheFields: [String] = []
    var mustRevalidate = false
    var mustUnderstand = false
    var isPublic = false
    var isImmutable = false
    var onlyIfCached = false
    /// Request directives: the oldest response the request accepts, how much fresher than
    /// its lifetime it must be, and how stale it may be (`max-stale` without a value: any).
    var minFresh: Int?
    var maxStale: Int?

    init(_ fields: HTTPFields) {
        for value in fields[values: .cacheControl] {
            for (name, argument) in Self.directives(in: value) {
                switch name {
                case "max-age": maxAge = argument.flatMap(Self.seconds)
                case "s-maxage": sharedMaxAge = argument.flatMap(Self.seconds)
                case "no-store": noStore = true
                case "no-cache":
                    if let argument, !argument.isEmpty {
                        noCacheFields += argument.fieldListElements.map { $0.lowercased() }
                    } else {
                        noCache = true
                    }
                case "must-revalidate", "proxy-revalidate": mustRevalidate = true
                case "must-understand": mustUnderstand = true
                case "public": isPublic = true
                case "immutable": isImmutable = true
                case "only-if-cached": onlyIfCached = true
                case "min-fresh": minFresh = argument.flatMap(Self.seconds)
                case "max-stale": maxStale = argument.map { Self.seconds($0) ?? 0 } ?? Self.largestDeltaSeconds
                default: break
                }
            }
        }
    }

    /// The directives of one field value: lowercased names, and arguments without their
    /// quotes. A comma inside a quoted argument (`no-cache="a, b"`) does not end it. Read by
    /// Unicode scalars (see `fieldParts(separatedBy:)`), so no comma hides in a grapheme.
    static func directives(in value: String) -> [(name: String, argument: String?)] {
        var directives: [(String, String?)] = []
        var current = String.UnicodeScalarView()
        var quoted = false
        func finish() {
            let parts = String(current).fieldParts(separatedBy: "=", maxSplits: 1)
            let name = parts[0].trimmedOfSpacesAndTabs.lowercased()
            if !name.isEmpty {
                var argument = parts.count > 1 ? parts[1].trimmedOfSpacesAndTabs : nil
                if var scalars = argument?.unicodeScalars, scalars.first == "\"" {
                    scalars.removeFirst()
                    if scalars.last == "\"" { scalars.removeLast() }
                    argument = String(scalars)
                }
                directives.append((name, argument))
            }
            current = String.UnicodeScalarView()
        }
        for scalar in value.unicodeScalars {
            if scalar == "\"" { quoted.toggle() }
            if scalar == ",", !quoted {
                finish()
            } else {
                current.append(scalar)
            }
        }
        finish()
        return directives
    }

    /// The largest delta-seconds value a cache keeps: a larger one means this many (RFC 9111
    /// section 1.2.2), so that no number from the network overflows the arithmetic on ages.
    static let largestDeltaSeconds = 2_147_483_648

    /// A delta-seconds value (digits only), saturated at ``largestDeltaSeconds``; `nil` for
    /// anything else (`7200.0`, `-1`, `1e9`).
    static func seconds(_ text: some StringProtocol) -> Int? {
        guard !text.isEmpty, text.allSatisfy(\.isASCIIDigit) else { return nil }
        return min(Int(text) ?? largestDeltaSeconds, largestDeltaSeconds)
    }
}
