/// Percent-encoding for the places Trellis writes values into a URL or a form.
///
/// Only RFC 3986 unreserved characters go out as they are, so that no value can add a path
/// segment, start a query or fragment, or be read back as a different value by a server
/// that decodes `+` as a space.
enum PercentEncoding {
    /// One path segment. The dot segments `.` and `..` never reach it: a URL normaliser
    /// would resolve them, encoded or not, so `_RequestBuilder` refuses them first.
    static func pathSegment(_ value: String) -> String {
        encode(value, spaceAsPlus: false)
    }

    /// A query item name or value.
    static func queryComponent(_ value: String) -> String {
        encode(value, spaceAsPlus: false)
    }

    /// An `application/x-www-form-urlencoded` name or value (WHATWG URL, section 5.2).
    static func formComponent(_ value: String) -> String {
        encode(value, spaceAsPlus: true)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    private static func encode(_ value: String, spaceAsPlus: Bool) -> String {
        let utf8 = value.utf8
        if utf8.allSatisfy(isUnreserved) { return value }
        let hex = Array("0123456789ABCDEF".utf8)
        var encoded: [UInt8] = []
        encoded.reserveCapacity(utf8.count * 3)
        for byte in utf8 {
            if isUnreserved(byte) {
                encoded.append(byte)
            } else if spaceAsPlus && byte == UInt8(ascii: " ") {
                encoded.append(UInt8(ascii: "+"))
            } else {
                encoded.append(UInt8(ascii: "%"))
                encoded.append(hex[Int(byte >> 4)])
                encoded.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }
}
