import Foundation
import HTTPTypes

/// Follows redirects as the client's ``RedirectPolicy`` says. Each hop goes down the rest of
/// the pipeline again, so the stages below (credentials, the access token, the plain-HTTP
/// rule, pins, logging) decide afresh for the hop's URL.
struct RedirectStage: Stage {
    /// Dropped on a hop to another origin when the caller set them by hand; the credential
    /// stages below add their own only for their origin.
    private static let credentialFields: [HTTPField.Name] = [.authorization, .cookie, .proxyAuthorization]

    let policy: RedirectPolicy
    /// The query parameters the client's ``APIKey``s put keys in. The hop stages mark them
    /// secret on the request each hop sends, which this stage never sees; a server may echo
    /// them into `Location`, so the redirect's events and errors redact them too.
    let secretQueryNames: Set<String>

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var current = request
        var call = call
        if !secretQueryNames.isEmpty { current.redactedQueryNames.formUnion(secretQueryNames) }
        var visited: Set<String> = []
        var followed = 0
        while true {
            let response = try await next(current, call)
            let code = response.status.code
            guard policy.maximum > 0, Self.isRedirect(code), let location = response.headerFields[.location],
                let currentURL = current.url, let target = URL(string: location, relativeTo: currentURL)?.absoluteURL
            else { return response }
            await response.body.discard()
            let failure = { (reason: String) in
                TrellisError.redirectFailed(RedirectFailure(
                    from: RequestLog.redactedURL(current),
                    to: RequestLog.redactedURL(target.absoluteString, also: current.redactedQueryNames),
                    reason: reason
                ))
            }
            followed += 1
            guard followed <= policy.maximum else { throw failure("more than \(policy.maximum) redirects") }
            visited.insert("\(current.method) \(current.urlString)")
            var redirected = current
            // Credentials given no origin of their own stay with the call's: worked out only
            // when there is a redirect, since most calls have none.
            if call.origin == nil { call.origin = current.origin }
            let targetHead: RequestTarget
            do { targetHead = try RequestTarget(target) } catch { throw failure("the target is not an http or https URL") }
            if current.head.scheme == "https", targetHead.scheme == "http", !policy.allowsInsecureDowngrade {
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
            call.observation?.redirectFollowed(from: current, to: redirected, status: response.status)
            current = redirected
        }
    }

    /// A switch rather than a set: every response is asked.
    private static func isRedirect(_ code: Int) -> Bool {
        switch code {
        case 301, 302, 303, 307, 308: true
        default: false
        }
    }
}
