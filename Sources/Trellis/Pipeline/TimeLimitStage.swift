/// The one place a call's time limits are decided: each attempt (the first, and each retry)
/// gets the request's ``Request/timeout``, or the client's, from when it starts, and the
/// client's idle timeout; its redirects and token replays share them. The transport holds the
/// exchange to them (``ExchangeLimits``).
///
/// The timeout is read here, after the call's middlewares ran, so a middleware or an endpoint
/// that sets ``Request/timeout`` is obeyed.
struct TimeLimitStage: Stage {
    let timeouts: Client.Configuration.Timeouts

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var call = call
        call.limits = ExchangeLimits(timeouts: timeouts, timeout: request.timeout, bufferLimit: call.bufferLimit)
        call.limits?.cancellation = call.cancellation
        return try await next(request, call)
    }
}
