import Foundation
import HTTPTypes

extension Request {
    /// The request an ``EndpointType`` value describes: its base URL and path, its parameters
    /// in the query (`GET`, `HEAD`, `DELETE`) or as a form body (other methods), its headers.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when the base URL is not an absolute
    ///   `http` or `https` URL, or a header is invalid.
    public init(endpoint: some EndpointType) throws {
        try self.init(
            baseURL: endpoint.baseUrl,
            path: endpoint.path,
            method: endpoint.method,
            parameters: endpoint.parameters,
            headers: endpoint.headers
        )
    }

    /// What an endpoint value (Yggdrasil's, wheel's) describes, built one way for both.
    init(baseURL: String, path: String, method: HTTPRequest.Method, parameters: [String: Any], headers: [String: String]) throws {
        let base = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        let path = path.isEmpty || path.hasPrefix("/") ? path : "/" + path
        let pairs = Self.parameterPairs(parameters)
        let inQuery = [.get, .head, .delete].contains(method)
        var text = base + path
        if inQuery, !pairs.isEmpty {
            let query = pairs.map { PercentEncoding.queryComponent($0.name) + "=" + PercentEncoding.queryComponent($0.value) }
            text += (text.contains("?") ? "&" : "?") + query.joined(separator: "&")
        }
        guard let url = URL(string: text) else {
            // The query may carry a credential: errors show URLs redacted, as logs do.
            throw TrellisError.invalidRequest(InvalidRequest(.url, "\"\(RequestLog.redactedURL(text))\" (the endpoint's base URL and path) is not a URL"))
        }
        var body: RequestBody?
        if !inQuery, !pairs.isEmpty {
            let form = pairs.map { PercentEncoding.formComponent($0.name) + "=" + PercentEncoding.formComponent($0.value) }
            body = RequestBody(form.joined(separator: "&"), contentType: "application/x-www-form-urlencoded")
        }
        try self.init(method: method, url: url, body: body)
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            try setHeader(name, value)
        }
    }

    /// Yggdrasil's `Request(url:ignoreLocalCache:retryCount:)`: a `GET` of `url`, sent again up
    /// to `retryCount` times after the first attempt, with the waits and statuses of the
    /// client's retry policy (``maximumRetries``). `ignoreLocalCache` skips the client's
    /// ``HTTPCache`` (``CachePolicy/reload``).
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when `url` is not an absolute `http` or
    ///   `https` URL.
    public init(url: String, ignoreLocalCache: Bool = false, retryCount: Int = 0) throws {
        guard let parsed = URL(string: url) else {
            throw TrellisError.invalidRequest(InvalidRequest(.url, "\"\(RequestLog.redactedURL(url))\" is not a URL"))
        }
        try self.init(method: .get, url: parsed)
        if retryCount > 0 { maximumRetries = retryCount }
        if ignoreLocalCache { cachePolicy = .reload }
    }

    /// Names and values in the order of the names, arrays repeating their name. A `nil`
    /// (an `Optional` put in the `[String: Any]`) is left out, as a service leaves out a `nil`
    /// argument, rather than sent as the text "nil".
    private static func parameterPairs(_ parameters: [String: Any]) -> [(name: String, value: String)] {
        var pairs: [(name: String, value: String)] = []
        for (name, value) in parameters.sorted(by: { $0.key < $1.key }) {
            guard let value = unwrapped(value) else { continue }
            if let values = value as? [Any] {
                pairs += values.compactMap(unwrapped).map { (name, text(of: $0)) }
            } else {
                pairs.append((name, text(of: value)))
            }
        }
        return pairs
    }

    /// The value inside any number of `Optional`s, or `nil`.
    private static func unwrapped(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value is NSNull ? nil : value }
        guard let wrapped = mirror.children.first?.value else { return nil }
        return unwrapped(wrapped)
    }

    private static func text(of value: Any) -> String {
        (value as? any ParameterValue)?.parameterValue ?? String(describing: value)
    }
}

extension Client {
    /// Sends the request an ``EndpointType`` value describes and decodes its body.
    public func value<Value: Decodable>(for endpoint: some EndpointType, as type: Value.Type = Value.self) async throws -> Value {
        try await value(for: Request(endpoint: endpoint), as: type)
    }

    /// Sends the request an ``EndpointType`` value describes for its effect.
    public func perform(_ endpoint: some EndpointType) async throws {
        try await perform(Request(endpoint: endpoint))
    }
}
