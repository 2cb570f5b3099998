import Foundation

/// HTTP dates (RFC 9110 section 5.6.7): the IMF-fixdate form servers send, and the two
/// obsolete forms recipients must still accept.
///
/// Parsed by hand rather than with `DateFormatter`: on Linux, Foundation's formatter traps on
/// some malformed input (found by the `fuzz-retry-after` harness), and a header is input from
/// the network.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let shortDays: Set<String> = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let longDays: Set<String> = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    static func parse(_ text: String) -> Date? {
        guard text.utf8.count <= 64, text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        // One space between the parts, as the grammar says: `Expires` with runs of spaces is
        // not a date (and so already expired), as browsers read it.
        var tokens = text.lowercased().split(separator: " ", omittingEmptySubsequences: false)
        guard let first = tokens.first else { return nil }
        if first.hasSuffix(",") {
            let day = first.dropLast()
            if tokens.count == 6, shortDays.contains(String(day)), tokens[5] == "gmt" {
                // Sun, 06 Nov 1994 08:49:37 GMT
                guard tokens[1].count == 2, tokens[3].count == 4 else { return nil }
                return date(year: tokens[3], month: tokens[2], day: tokens[1], time: tokens[4])
            }
            if tokens.count == 4, longDays.contains(String(day)), tokens[3] == "gmt" {
                // Sunday, 06-Nov-94 08:49:37 GMT
                let parts = tokens[1].split(separator: "-", omittingEmptySubsequences: false)
                guard parts.count == 3, parts[0].count == 2, parts[2].count == 2, let short = Int(parts[2]) else { return nil }
                // Two-digit years are read within 1970...2069.
                let year = short < 70 ? 2000 + short : 1900 + short
                return date(year: Substring(String(year)), month: parts[1], day: parts[0], time: tokens[2])
            }
            return nil
        }
        // Sun Nov  6 08:49:37 1994: a day of one digit is padded with a space.
        if tokens.count == 6, tokens[2].isEmpty, tokens[3].count == 1 { tokens.remove(at: 2) }
        guard tokens.count == 5, shortDays.contains(String(first)), (1...2).contains(tokens[2].count), tokens[4].count == 4 else { return nil }
        return date(year: tokens[4], month: tokens[1], day: tokens[2], time: tokens[3])
    }

    private static func date(year: Substring, month: Substring, day: Substring, time: Substring) -> Date? {
        guard year.allSatisfy(\.isASCIIDigit), day.allSatisfy(\.isASCIIDigit),
            let year = Int(year), let day = Int(day),
            let monthIndex = months.firstIndex(of: String(month))
        else { return nil }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCIIDigit) }),
            let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
            hour < 24, minute < 60, second < 61
        else { return nil }
        let month = monthIndex + 1
        guard day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (the civil-from-days
    /// inverse, counting from March so that the leap day ends a year).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension Character {
    /// 0 to 9, and no other digit of any script: what the numbers of header fields are made of.
    var isASCIIDigit: Bool { isASCII && isNumber }
}
