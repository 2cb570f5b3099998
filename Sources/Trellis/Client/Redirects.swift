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

extension RedirectPolicy {
    private static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]
    private static let credentialFields: [HTTPField.Name] = [.authorization, .cookie, .proxyAuthorization]

    func send(
        _ request: Request,
        next: (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        var current = request
        var visited: Set<String> = []
        var followed = 0
        while true {
            let response = try await next(current)
            let code = response.status.code
            guard maximum > 0, Self.redirectStatuses.contains(code), let location = response.headerFields[.location],
                let currentURL = current.url, let target = URL(string: location, relativeTo: currentURL)?.absoluteURL
            else { return response }
            await response.body.discard()
            let failure = { (reason: String) in
                TrellisError.redirectFailed(RedirectFailure(from: RequestLog.redactedURL(current), to: target.absoluteString, reason: reason))
            }
            followed += 1
            guard followed <= maximum else { throw failure("more than \(maximum) redirects") }
            visited.insert("\(current.method) \(current.urlString)")
            var redirected = current
            let targetHead: RequestTarget
            do { targetHead = try RequestTarget(target) } catch { throw failure("the target is not an http or https URL") }
            if current.head.scheme == "https", targetHead.scheme == "http", !allowsInsecureDowngrade {
                throw failure("a redirect from https to http is refused; set allowsInsecureDowngrade to follow it")
            }
            redirected.head.scheme = targetHead.scheme
            redirected.head.authority = targetHead.authority
            redirected.head.path = targetHead.pathAndQuery
            let becomesGET = (code == 303 && current.method != .head) || ((code == 301 || code == 302) && current.method == .post)
            if becomesGET {
                redirected.method = .get
                redirected.body = nil
                redirected.headerFields[.contentType] = nil
                redirected.headerFields[.contentLength] = nil
            } else if let body = current.body, !body.isReplayable {
                throw failure("the request body is a one-shot stream and cannot be sent again")
            }
            if current.origin != redirected.origin {
                for name in Self.credentialFields { redirected.headerFields[name] = nil }
            }
            guard !visited.contains("\(redirected.method) \(redirected.urlString)") else {
                throw failure("a redirect loop")
            }
            current = redirected
        }
    }
}
