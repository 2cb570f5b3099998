public import Foundation

// Snowdrop's names for what Trellis spells its own way, so that Snowdrop code moves over by
// changing its import (the article "Migrating from Snowdrop"). An endpoint declared with one of the
// `url:` macros below also gets the names Snowdrop's first README gives its extra arguments,
// `_queryItems:` and `_payloadDescription:` (see `ServiceMacro`).

/// A `GET` endpoint, in Snowdrop's spelling.
@attached(peer) public macro GET(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `POST` endpoint, in Snowdrop's spelling.
@attached(peer) public macro POST(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `PUT` endpoint, in Snowdrop's spelling.
@attached(peer) public macro PUT(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `DELETE` endpoint, in Snowdrop's spelling.
@attached(peer) public macro DELETE(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `PATCH` endpoint, in Snowdrop's spelling.
@attached(peer) public macro PATCH(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `HEAD` endpoint, in Snowdrop's spelling.
@attached(peer) public macro HEAD(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// An `OPTIONS` endpoint, in Snowdrop's spelling.
@attached(peer) public macro OPTIONS(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `QUERY` endpoint, in Snowdrop's spelling.
@attached(peer) public macro QUERY(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `TRACE` endpoint, in Snowdrop's spelling.
@attached(peer) public macro TRACE(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `CONNECT` endpoint, in Snowdrop's spelling.
@attached(peer) public macro CONNECT(url path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

extension URLQueryItem {
    /// A query item, in Snowdrop's spelling.
    public init(key: String, value: String?) {
        self.init(name: key, value: value)
    }
}

extension TrellisService {
    /// A service for `baseUrl`, in Snowdrop's spelling.
    public init(baseUrl: URL) {
        self.init(client: Client(baseURL: baseUrl))
    }
}

extension AccessTokenSettings {
    /// ``refreshStatuses`` in Snowdrop's spelling.
    public var accessTokenErrorCodes: Set<Int> {
        get { refreshStatuses }
        set { refreshStatuses = newValue }
    }
}
