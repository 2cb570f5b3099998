public import Foundation

/// A response type that makes itself from the body's bytes: an image, XML, a protocol buffer,
/// anything JSON decoding does not cover. Yggdrasil's `Parsable`.
///
/// A `@Service` method may return a `Parsable` type, and `Client.value(for:as:)` takes one.
/// A `Decodable` type adopts it with an empty extension and is then decoded as JSON by
/// `parseData(_:)`'s default, as Yggdrasil's README shows; a type that is both and implements
/// `parseData(_:)` itself is made by it, not by the client's decoder.
///
/// ```swift
/// struct Lines: Parsable {
///     var lines: [String]
///     static func parseData(_ data: Data) throws -> Lines {
///         Lines(lines: String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init))
///     }
/// }
/// ```
public protocol Parsable {
    /// The value for a response body; an error thrown here becomes
    /// ``TrellisError/decodingFailed(_:)`` with the body.
    static func parseData(_ data: Data) throws -> Self
}

extension Parsable where Self: Decodable {
    /// The body decoded as JSON.
    public static func parseData(_ data: Data) throws -> Self {
        try JSONDecoder().decode(Self.self, from: data)
    }
}
