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

    /// A delta-seconds value; one too large for an `Int` is the largest (RFC 9111 section 1.2.2).
    private static func seconds(_ text: String) -> Int? {
        guard !text.isEmpty, text.allSatisfy(\.isASCIIDigit) else { return nil }
        return Int(text) ?? Int(Int32.max)
    }
}

import Foundation
