import Foundation
import HTTPTypes

/// Sends HTTP Basic credentials (RFC 7617) with every request to the client's origin.
///
/// ```swift
/// let client = Client(baseURL: url, middlewares: [BasicAuthentication(username: "ada", password: "lovelace")])
/// ```
public struct BasicAuthentication: Middleware {
    private let value: String
    private let origin: String?

    /// Credentials for requests to `origin`'s scheme, host and port, or, when none is given,
    /// to the origin each call is made to: a redirect to another origin never carries them.
    public init(username: String, password: String, origin: URL? = nil) {
        self.value = "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
        self.origin = origin.flatMap(Request.origin(of:))
    }

    /// Every hop: a redirect to another origin is decided afresh, without these credentials.
    public var scope: MiddlewareScope { .hop }

    public func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        try await next(credited(request, callOrigin: nil))
    }

    /// `request` with the credentials, when it goes to their origin.
    private func credited(_ request: Request, callOrigin: String?) -> Request {
        guard request.isScoped(to: origin ?? callOrigin) else { return request }
        var request = request
        request.setCredentialField(.authorization, value)
        return request
    }
}

extension BasicAuthentication: Stage {
    /// In a client's pipeline, where a redirected hop knows the origin the call was made to.
    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        try await next(credited(request, callOrigin: call.origin), call)
    }
}

/// Sends a static API key with every request, as a header or a query parameter.
///
/// ```swift
/// let client = Client(baseURL: url, middlewares: [try APIKey(.header("X-API-Key"), "s3cr3t")])
/// ```
public struct APIKey: Middleware {
    /// Where the key goes.
    public enum Placement: Sendable {
        /// A header of this name.
        case header(String)
        /// A query parameter of this name.
        case query(String)
    }

    private let placement: Placement
    private let fieldName: HTTPField.Name?
    private let key: String
    private let origin: String?

    /// A key sent in `placement` to `origin`, or, when none is given, to the origin each call
    /// is made to: a redirect to another origin never carries it. Logs and errors redact it
    /// whatever its name.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when the header name is not a valid token
    ///   or the key holds CR, LF or NUL.
    public init(_ placement: Placement, _ key: String, origin: URL? = nil) throws {
        self.placement = placement
        if case .header(let name) = placement {
            self.fieldName = try Request.fieldName(name)
            self.key = try Request.checkedValue(key, for: name)
        } else {
            self.fieldName = nil
            self.key = key
        }
        self.origin = origin.flatMap(Request.origin(of:))
    }

    /// The query parameter the key goes in, if it goes in one: the client redacts that name
    /// wherever a URL is shown, on every hop, since a server may echo it into a redirect.
    var queryName: String? {
        if case .query(let name) = placement { return name }
        return nil
    }

    /// Every hop: a redirect to another origin is decided afresh, without these credentials.
    public var scope: MiddlewareScope { .hop }

    public func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        try await next(keyed(request, callOrigin: nil))
    }

    /// `request` with the key, when it goes to the key's origin.
    private func keyed(_ request: Request, callOrigin: String?) -> Request {
        guard request.isScoped(to: origin ?? callOrigin) else { return request }
        var request = request
        switch placement {
        case .header:
            if let fieldName { request.setCredentialField(fieldName, key) }
        case .query(let name):
            request.redactedQueryNames.insert(name)
            let item = PercentEncoding.queryComponent(name) + "=" + PercentEncoding.queryComponent(key)
            let path = request.head.path ?? "/"
            request.head.path = path + (path.contains("?") ? "&" : "?") + item
        }
        return request
    }
}

extension APIKey: Stage {
    /// In a client's pipeline, where a redirected hop knows the origin the call was made to.
    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        try await next(keyed(request, callOrigin: call.origin), call)
    }
}

extension Request {
    /// Whether a credential for `scope` goes with this request: it does when the request goes
    /// to that origin, or when there is none (the first hop of a call is its own origin).
    func isScoped(to scope: String?) -> Bool {
        guard let scope else { return true }
        return origin == scope
    }

    /// Sets `name` to `value` in place of any value it had, marked sensitive: HPACK never
    /// indexes it, and logs and errors redact it whatever its name (see `RequestLog`).
    mutating func setCredentialField(_ name: HTTPField.Name, _ value: String) {
        headerFields[name] = nil
        var field = HTTPField(name: name, value: value)
        field.indexingStrategy = .disallow
        headerFields.append(field)
    }
}
