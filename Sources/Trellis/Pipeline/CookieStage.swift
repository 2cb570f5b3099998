import HTTPTypes
import Logging

/// Sends the jar's cookies with each hop and keeps the cookies each response sets, decided
/// for that hop's URL: a redirect to another host carries that host's cookies, never the
/// first one's (RFC 6265).
///
/// A `Cookie` field the request already has (set by the caller or a middleware) is kept, and
/// the jar's cookies follow it.
struct CookieStage: Stage {
    let jar: CookieJar
    let logger: Logger
    /// The client's clock: a cookie's `Max-Age` and `Expires` are read on it, as the cache's
    /// ages are.
    let clock: any ClientClock

    // The scope is worked out only when there is something to match or store: most hops have
    // neither.
    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var request = request
        if !jar.isEmpty, let header = jar.cookieHeader(for: CookieScope(request: request), at: clock.now) {
            let existing = request.headerFields[.cookie]
            request.headerFields[.cookie] = existing.map { $0 + "; " + header } ?? header
        }
        return keepingCookies(of: try await next(request, call), for: request)
    }

    private func keepingCookies(of response: Response<ResponseBody>, for request: Request) -> Response<ResponseBody> {
        guard response.headerFields.contains(.setCookie) else { return response }
        let setCookies = response.headerFields[values: .setCookie]
        if !setCookies.isEmpty {
            for refusal in jar.store(setCookies, from: CookieScope(request: request), at: clock.now) {
                logger.debug("\(RequestLog.summary(request)): a cookie was refused: \(refusal)")
            }
        }
        return response
    }
}
