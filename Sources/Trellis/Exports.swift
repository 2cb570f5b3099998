// A service file needs `URL`, `Data` and the HTTP status and header types; importing Trellis
// alone should be enough to declare and call a service.
@_exported public import Foundation
@_exported public import HTTPTypes

/// A query item added at the call site, through a generated method's `queryItems:` argument.
public typealias QueryItem = URLQueryItem
