import Foundation

/// The lenient date algorithm of RFC 6265 section 5.1.1, which reads the `Expires` forms
/// servers actually send (`Wed, 21 Oct 2015 07:28:00 GMT`, `Wed, 21-Oct-15 07:28:00 GMT`, …).
/// Parsed by hand: a header is input from the network, and Foundation's formatters are neither
/// lenient in this way nor safe on every malformed input on Linux.
enum CookieDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    static func parse(_ text: String) -> Date? {
        guard text.utf8.count <= 128 else { return nil }
        var time: (Int, Int, Int)?
        var dayOfMonth: Int?
        var month: Int?
        var year: Int?
        for token in text.utf8.split(whereSeparator: isDelimiter) {
            let token = Substring(String(decoding: token, as: UTF8.self))
            if time == nil, let parsed = clock(token) {
                time = parsed
            } else if dayOfMonth == nil, let parsed = leadingDigits(token, 1...2) {
                dayOfMonth = parsed
            } else if month == nil, token.count >= 3, let index = months.firstIndex(of: token.prefix(3).lowercased()) {
                month = index + 1
            } else if year == nil, let parsed = leadingDigits(token, 2...4) {
                year = parsed
            }
        }
        guard var year, let month, let dayOfMonth, let time else { return nil }
        let (hour, minute, second) = time
        if (70...99).contains(year) { year += 1900 }
        if (0...69).contains(year) { year += 2000 }
        guard year >= 1601, (1...31).contains(dayOfMonth), hour <= 23, minute <= 59, second <= 59 else { return nil }
        var components = DateComponents()
        components.year = year
        components.month = month
        components.day = dayOfMonth
        components.hour = hour
        components.minute = minute
        components.second = second
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: components), calendar.component(.day, from: date) == dayOfMonth else { return nil }
        return date
    }

    private static func isDelimiter(_ byte: UInt8) -> Bool {
        byte == 0x09 || (0x20...0x2F).contains(byte) || (0x3B...0x40).contains(byte) || (0x5B...0x60).contains(byte)
            || (0x7B...0x7E).contains(byte)
    }

    /// `hh:mm:ss`, each one or two digits, possibly followed by non-digits.
    private static func clock(_ token: Substring) -> (Int, Int, Int)? {
        let parts = token.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3,
            let hour = leadingDigits(parts[0], 1...2, exact: true),
            let minute = leadingDigits(parts[1], 1...2, exact: true),
            let second = leadingDigits(parts[2], 1...2)
        else { return nil }
        return (hour, minute, second)
    }

    /// The number a token starts with, when it has `digits` digits and, unless `exact`,
    /// anything but a digit after them.
    private static func leadingDigits(_ token: Substring, _ digits: ClosedRange<Int>, exact: Bool = false) -> Int? {
        let leading = token.prefix(while: \.isASCIIDigit)
        guard digits.contains(leading.count) else { return nil }
        if exact && leading.count != token.count { return nil }
        return Int(leading)
    }
}
