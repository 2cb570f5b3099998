import HTTPTypes

/// The `Cache-Control` directives a private cache acts on (RFC 9111 section 5.2), read
/// leniently: an unknown directive is ignored, a malformed number is taken as absent.
struct CacheControl {
    var maxAge: Int?
    var sharedMaxAge: Int?
    var noStore = false
    var noCache = false
    var mustRevalidate = false
    var isPublic = false
    var onlyIfCached = false

    init(_ fields: HTTPFields) {
        for value in fields[values: .cacheControl] {
            for directive in value.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1)
                let name = parts.first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
                let argument = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
                switch name {
                case "max-age": maxAge = argument.flatMap(Self.seconds)
                case "s-maxage": sharedMaxAge = argument.flatMap(Self.seconds)
                case "no-store": noStore = true
                case "no-cache": noCache = true
                case "must-revalidate", "proxy-revalidate": mustRevalidate = true
                case "public": isPublic = true
                case "only-if-cached": onlyIfCached = true
                default: break
                }
            }
        }
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

import Foundation
