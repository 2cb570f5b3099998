import Foundation
import HTTPTypes

/// A stored response: its head, what it varies on, when it was received, and the length and
/// digest of its body (which the disk store checks before serving an entry).
struct CachedResponse: Codable, Sendable {
    var url: String
    var status: Int
    var reasonPhrase: String
    var fields: [[String]]
    /// The request's values of the fields the response's `Vary` names, lowercased names.
    var varyValues: [String: String]
    var requestTime: Date
    var responseTime: Date
    var bodyLength: Int
    var bodyDigest: String

    /// The bytes of what is stored beside the body: the URL, the fields and the request
    /// values the response varies on.
    var headSize: Int {
        url.utf8.count + reasonPhrase.utf8.count
            + fields.reduce(0) { total, pair in pair.reduce(total) { $0 + $1.utf8.count } }
            + varyValues.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }

    var head: HTTPResponse {
        var head = HTTPResponse(status: .init(code: status, reasonPhrase: reasonPhrase))
        for pair in fields where pair.count == 2 {
            if let name = HTTPField.Name(pair[0]) { head.headerFields.append(HTTPField(name: name, value: pair[1])) }
        }
        return head
    }

    init(url: String, head: HTTPResponse, request: Request, requestTime: Date, responseTime: Date, bodyLength: Int, bodyDigest: String) {
        self.url = url
        self.status = head.status.code
        self.reasonPhrase = head.status.reasonPhrase
        // A stored response sets no cookies again: `Set-Cookie` was for the response that
        // carried it (RFC 9111 section 3.1 lets a cache leave it out).
        self.fields = head.headerFields.filter { $0.name != .setCookie }.map { [$0.name.rawName, $0.value] }
        self.varyValues = Self.varyValues(of: head, for: request)
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.bodyLength = bodyLength
        self.bodyDigest = bodyDigest
    }

    /// The names a response varies on, lowercased; `["*"]` for a response that varies on
    /// everything.
    static func varyNames(of head: HTTPResponse) -> [String] {
        head.headerFields[values: .vary].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
    }

    static func varyValues(of head: HTTPResponse, for request: Request) -> [String: String] {
        var values: [String: String] = [:]
        for name in varyNames(of: head) {
            guard let fieldName = HTTPField.Name(name) else { continue }
            values[name] = request.headerFields[values: fieldName].joined(separator: ", ")
        }
        return values
    }

    /// Whether `request` asks for the same representation (RFC 9111 section 4.1).
    func matches(_ request: Request) -> Bool {
        varyValues.allSatisfy { name, value in
            guard let fieldName = HTTPField.Name(name) else { return false }
            return request.headerFields[values: fieldName].joined(separator: ", ") == value
        }
    }

    /// How long the response is fresh for, from its `max-age` or `Expires`; `nil` when it gave
    /// neither (it is then revalidated each time).
    private func freshnessLifetime(_ head: HTTPResponse, _ control: CacheControl) -> TimeInterval? {
        if let maxAge = control.maxAge { return TimeInterval(maxAge) }
        guard let expires = head.headerFields[.expires] else { return nil }
        // An invalid Expires, "0" included, means already expired (RFC 9111 section 5.3).
        guard let expiry = HTTPDate.parse(expires) else { return 0 }
        let date = head.headerFields[.date].flatMap(HTTPDate.parse) ?? responseTime
        return expiry.timeIntervalSince(date)
    }

    /// The response's age now (RFC 9111 section 4.2.3).
    func currentAge(at now: Date, head: HTTPResponse? = nil) -> TimeInterval {
        let head = head ?? self.head
        let ageValue = TimeInterval(Self.age(of: head) ?? 0)
        let dateValue = head.headerFields[.date].flatMap(HTTPDate.parse) ?? responseTime
        let apparentAge = max(0, responseTime.timeIntervalSince(dateValue))
        let correctedAge = ageValue + responseTime.timeIntervalSince(requestTime)
        return max(apparentAge, correctedAge) + now.timeIntervalSince(responseTime)
    }

    /// The `Age` a response carries: the first member of a list, and none when that is not
    /// delta-seconds (RFC 9111 section 5.1).
    static func age(of head: HTTPResponse) -> Int? {
        guard let value = head.headerFields[values: .age].first else { return nil }
        let first = value.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return CacheControl.seconds(first.trimmingCharacters(in: .whitespaces))
    }

    func isFresh(at now: Date) -> Bool {
        // The head is rebuilt from the stored fields once for the whole decision.
        let head = head
        let control = CacheControl(head.headerFields)
        guard !control.noCache, let lifetime = freshnessLifetime(head, control) else { return false }
        return lifetime > currentAge(at: now, head: head)
    }
}
