import Foundation
import HTTPTypes

/// How a client follows redirects. Trellis follows them itself rather than leaving it to the
/// transport, so both transports behave the same and the rules below always hold.
///
/// - 301, 302 and 303 turn a `POST` (303: any method but `HEAD`) into a `GET` without a body,
///   as browsers do; 307 and 308 keep the method and body.
/// - A redirect to another origin drops `Authorization`, `Cookie` and `Proxy-Authorization`.
/// - A redirect from `https` to `http` is refused unless ``allowsInsecureDowngrade`` is set.
/// - A loop, or more than ``maximum`` redirects, fails with ``TrellisError/redirectFailed(_:)``.
public struct RedirectPolicy: Sendable {
    /// The most redirects one request follows; 0 returns the 3xx response to the caller.
    public var maximum: Int
    /// Whether a redirect from `https` to `http` is followed.
    public var allowsInsecureDowngrade: Bool

    /// Creates a policy.
    public init(maximum: Int = 10, allowsInsecureDowngrade: Bool = false) {
        self.maximum = max(0, maximum)
        self.allowsInsecureDowngrade = allowsInsecureDowngrade
    }

    /// Follows up to 10 redirects: the default.
    public static let follow = RedirectPolicy()
    /// Returns redirects to the caller as they are.
    public static let none = RedirectPolicy(maximum: 0)
}
