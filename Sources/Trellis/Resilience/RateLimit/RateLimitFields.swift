import Foundation
import HTTPTypes

/// What an answer's rate-limit fields say about the quota: whether it is spent, and how long
/// until it resets. Read from the IETF httpapi draft's `RateLimit` (`"default";r=0;t=30`, or
/// the earlier `limit=100, remaining=0, reset=30`) and `RateLimit-Remaining`/`-Reset`, and from
/// the common `X-RateLimit-Remaining`/`-Reset`.
enum RateLimitFields {
    /// The longest reset believed: a server's field is network input.
    static let longestReset: Duration = .seconds(86_400)

    /// How long until the quota resets, when `head` says it is spent; `nil` when it does not,
    /// or says it in a way that cannot be read. `now` is read only when it says so.
    static func spentFor(_ head: HTTPResponse, now: @autoclosure () -> Date) -> Duration? {
        // One pass over the fields, most answers having none of these: five lookups by name,
        // each walking them all, cost 5% more CPU per call (Benchmarks/README.md).
        var remaining: Double?
        var reset: Double?
        for field in head.headerFields {
            switch field.name {
            case rateLimit:
                for (name, value) in parameters(field.value) {
                    switch name {
                    case "r", "remaining": remaining = remaining ?? value
                    case "t", "reset": reset = reset ?? value
                    default: break
                    }
                }
            case rateLimitRemaining, xRateLimitRemaining: remaining = remaining ?? number(field.value)
            case rateLimitReset, xRateLimitReset: reset = reset ?? number(field.value)
            default: break
            }
        }
        guard remaining == 0, var seconds = reset else { return nil }
        // A reset too large for seconds from now is a Unix time (GitHub's `X-RateLimit-Reset`).
        if seconds > 1_000_000_000 { seconds -= now().timeIntervalSince1970 }
        guard seconds > 0 else { return nil }
        let duration = Duration.saturating(seconds: seconds)
        return duration <= longestReset ? duration : nil
    }

    /// The `name=number` parameters of a field, wherever they are in it: `;`- and
    /// `,`-separated, quoted names passed over.
    private static func parameters(_ value: String) -> [(String, Double)] {
        value.split(whereSeparator: { $0 == ";" || $0 == "," }).compactMap { part in
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, let number = number(String(pair[1])) else { return nil }
            return (pair[0].trimmingCharacters(in: .whitespaces).lowercased(), number)
        }
    }

    /// A non-negative decimal number, or `nil`.
    private static func number(_ value: String?) -> Double? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty,
            value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: ".") }),
            let number = Double(value), number.isFinite
        else { return nil }
        return number
    }

    private static let rateLimit = HTTPField.Name("RateLimit")!
    private static let rateLimitRemaining = HTTPField.Name("RateLimit-Remaining")!
    private static let rateLimitReset = HTTPField.Name("RateLimit-Reset")!
    private static let xRateLimitRemaining = HTTPField.Name("X-RateLimit-Remaining")!
    private static let xRateLimitReset = HTTPField.Name("X-RateLimit-Reset")!
}
