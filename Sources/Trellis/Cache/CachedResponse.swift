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
        // carried it, and serving it again would bring back a cookie deleted since (Chromium
        // stores responses without their cookies for the same reason). Nor are the fields
        // that belong to the connection kept: `Connection` and the fields it names, and the
        // other hop-by-hop ones (RFC 9111 section 3.1).
        let connectionFields = Set(head.headerFields[values: .connection].flatMap(\.fieldListElements).map { $0.lowercased() })
        self.fields = head.headerFields.filter { field in
            let name = field.name.canonicalName
            return !Self.notStored.contains(name) && !connectionFields.contains(name)
        }.map { [$0.name.rawName, $0.value] }
        self.varyValues = Self.varyValues(of: head, for: request)
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.bodyLength = bodyLength
        self.bodyDigest = bodyDigest
    }

    /// Fields never stored: cookies, and the hop-by-hop fields of RFC 9110 section 7.6.1.
    private static let notStored: Set<String> = [
        "set-cookie", "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "trailer",
    ]

    /// The names a response varies on, lowercased; `["*"]` for a response that varies on
    /// everything.
    static func varyNames(of head: HTTPResponse) -> [String] {
        head.headerFields[values: .vary].flatMap(\.fieldListElements).map { $0.lowercased() }
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

    /// The statuses a cache may store without explicit freshness, and give a heuristic one
    /// (RFC 9110 section 15.1).
    static let heuristicallyCacheableStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The longest heuristic lifetime given: a response last modified a year ago is not
    /// taken as fresh for five weeks.
    static let longestHeuristicLifetime: TimeInterval = 24 * 60 * 60

    /// How long the response is fresh for: its `max-age`, else its `Expires`, else, for a
    /// heuristically cacheable status with `Last-Modified`, a tenth of the time since then
    /// (RFC 9111 section 4.2.2, as browsers do), at most a day; `nil` when there is nothing to
    /// go on (it is then revalidated each time).
    private func freshnessLifetime(_ head: HTTPResponse, _ control: CacheControl) -> TimeInterval? {
        if let maxAge = control.maxAge { return TimeInterval(maxAge) }
        let date = head.headerFields[.date].flatMap(HTTPDate.parse) ?? responseTime
        if let expires = head.headerFields[.expires] {
            // An invalid Expires, "0" included, means already expired (RFC 9111 section 5.3).
            guard let expiry = HTTPDate.parse(expires) else { return 0 }
            return expiry.timeIntervalSince(date)
        }
        guard Self.heuristicallyCacheableStatuses.contains(status),
            let lastModified = head.headerFields[.lastModified].flatMap(HTTPDate.parse)
        else { return nil }
        return min(max(0, date.timeIntervalSince(lastModified) / 10), Self.longestHeuristicLifetime)
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
        return CacheControl.seconds(value.fieldParts(separatedBy: ",", maxSplits: 1)[0].trimmedOfSpacesAndTabs)
    }

    /// Whether the stored response may answer a request with `request`'s `Cache-Control`
    /// without being revalidated (RFC 9111 sections 4.2 and 5.2.1): it is fresh, or as stale
    /// as the request allows, and as young and as fresh as the request asks.
    func isUsable(for request: CacheControl, at now: Date) -> Bool {
        // The head is rebuilt from the stored fields once for the whole decision.
        let head = head
        let control = CacheControl(head.headerFields)
        guard !control.noCache, let lifetime = freshnessLifetime(head, control) else { return false }
        let age = currentAge(at: now, head: head)
        let isFresh = lifetime > age
        // `immutable`: a reload's no-cache does not send a fresh response back to the server.
        if isFresh, control.isImmutable { return true }
        if request.noCache { return false }
        if let maxAge = request.maxAge, age > TimeInterval(maxAge) || maxAge == 0 { return false }
        if let minFresh = request.minFresh, lifetime - age < TimeInterval(minFresh) { return false }
        if isFresh { return true }
        guard let maxStale = request.maxStale, !control.mustRevalidate else { return false }
        return age - lifetime <= TimeInterval(maxStale)
    }
}
