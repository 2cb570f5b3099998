// A service file needs `URL`, `Data` and the HTTP status and header types; importing Trellis
// alone should be enough to declare and call a service.
@_exported public import Foundation
@_exported public import HTTPTypes

/// A query item added at the call site through a generated method's `_queryItems` argument.
public typealias QueryItem = URLQueryItem

extension URLQueryItem {
    /// A query item, in Snowdrop's spelling.
    public init(key: String, value: String?) {
        self.init(name: key, value: value)
    }
}
