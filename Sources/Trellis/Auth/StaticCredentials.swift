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
        guard Request.isScoped(request, to: origin) else { return try await next(request) }
        var request = request
        request.setCredentialField(.authorization, value)
        return try await next(request)
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
        guard Request.isScoped(request, to: origin) else { return try await next(request) }
        var request = request
        switch placement {
        case .header:
            if let fieldName { request.setCredentialField(fieldName, key) }
        case .query(let name):
            request.sensitiveQueryNames.insert(name)
            let item = PercentEncoding.queryComponent(name) + "=" + PercentEncoding.queryComponent(key)
            let path = request.head.path ?? "/"
            request.head.path = path + (path.contains("?") ? "&" : "?") + item
        }
        return try await next(request)
    }
}

extension Request {
    /// Whether a credential for `origin` (or, without one, for the origin the call was made
    /// to) goes with `request`. The first hop of a call is its own origin.
    static func isScoped(_ request: Request, to origin: String?) -> Bool {
        guard let scope = origin ?? request.callOrigin else { return true }
        return request.origin == scope
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
