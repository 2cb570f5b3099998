public import Foundation

/// A value that can stand in a URL path segment, a query item, a form field or a header.
///
/// Conform your own types by giving their textual form. Optionals, arrays and
/// `RawRepresentable` types whose raw value is a `ParameterValue` are handled without
/// conforming: `nil` is left out, an array repeats its key, an enum sends its raw value.
public protocol ParameterValue {
    /// The text sent for this value, before percent-encoding.
    var parameterValue: String { get }
}

extension String: ParameterValue {
    public var parameterValue: String { self }
}

extension Substring: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension Bool: ParameterValue {
    public var parameterValue: String { self ? "true" : "false" }
}

extension Int: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension Int8: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension Int16: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension Int32: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension Int64: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension UInt: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension UInt8: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension UInt16: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension UInt32: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension UInt64: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension Double: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension Float: ParameterValue {
    public var parameterValue: String { String(self) }
}

extension Decimal: ParameterValue {
    public var parameterValue: String { description }
}

extension Date: ParameterValue {
    /// ISO 8601 in UTC, date and time, with fractional seconds only when there are some:
    /// `2026-11-21T18:39:00Z`, `1970-01-01T00:00:01.500Z`.
    public var parameterValue: String {
        let whole = timeIntervalSince1970.rounded(.down) == timeIntervalSince1970
        return ISO8601Format(Date.ISO8601FormatStyle(includingFractionalSeconds: !whole))
    }
}

extension UUID: ParameterValue {
    public var parameterValue: String { uuidString }
}

extension URL: ParameterValue {
    public var parameterValue: String { absoluteString }
}
