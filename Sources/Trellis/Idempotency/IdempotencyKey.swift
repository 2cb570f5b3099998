import Foundation

/// The key a call sends in `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header-07) on
/// every attempt: its retries and hedges, the redirects that keep its method, the replay after
/// a token refresh, the resend of a stale connection. A server that honours the key carries the
/// call out once however often it arrives, and answers each arrival with the first answer.
///
/// A keyed call is sent again as safely as a `GET`: the retry policy, the retry budget and
/// hedging treat it as idempotent. Key a call with ``Request/idempotencyKey``, an endpoint
/// with `@IdempotencyKey`, or every `POST` and `PATCH` of a client with
/// ``Client/Configuration-swift.struct/idempotencyKeys``.
///
/// ```swift
/// var request = try Request(method: .post, url: url.appending(path: "orders"))
/// request.idempotencyKey = .generated          // a new random key for this call
/// request.idempotencyKey = IdempotencyKey("order-\(orderID)")   // or one of your records
/// ```
public struct IdempotencyKey: Sendable, Hashable, CustomStringConvertible {
    /// The key's value; `nil` for ``generated``, whose value each call draws.
    let value: String?

    private init(value: String?) {
        self.value = value
    }

    /// A new random key (a UUID) for each call made with the request: the key of a call that is
    /// keyed without one of its own.
    public static let generated = IdempotencyKey(value: nil)

    /// The key `value`, for a key tied to a record of your own: calls with the same key are one
    /// operation for the server, across processes and restarts. A call whose key is empty, or
    /// holds characters other than visible ASCII (or `"` or `\`), fails before anything is
    /// sent, with ``TrellisError/invalidRequest(_:)`` naming the key.
    public init(_ value: String) {
        self.value = value
    }

    public var description: String { value ?? "a generated key" }

    /// The key a call sends: its own value, or a new UUID.
    func draw() -> String {
        value ?? UUID().uuidString.lowercased()
    }

    /// Why `key` cannot be sent as the draft's string (a structured field string: visible
    /// ASCII and spaces, without `"` and `\`, which would need escaping that servers read
    /// differently), or `nil` when it can.
    static func problem(with key: String) -> String? {
        if key.isEmpty { return "the idempotency key is empty" }
        if key.utf8.count > 255 { return "the idempotency key \(key.prefix(40))… is longer than 255 bytes" }
        guard key.utf8.allSatisfy({ (0x20...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
            return "the idempotency key \(key.debugDescription) holds a character other than visible ASCII, or a quote or backslash"
        }
        return nil
    }
}
