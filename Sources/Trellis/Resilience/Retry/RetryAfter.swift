import Foundation

/// `Retry-After` (RFC 9110 section 10.2.3): a number of seconds, or an HTTP date.
enum RetryAfter {
    static func delay(_ value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            // delay-seconds is digits only; a number too long for any integer is a very long wait.
            return .saturating(seconds: Double(trimmed) ?? .infinity)
        }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        let interval = date.timeIntervalSince(now)
        return .saturating(seconds: interval)
    }
}
