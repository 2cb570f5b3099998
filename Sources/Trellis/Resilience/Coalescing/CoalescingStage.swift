/// Lets identical buffered `GET` and `HEAD` exchanges in flight together share one request
/// (``Coalescing``): the first goes on down the pipeline, the others wait for its response.
///
/// It sits on every hop after every stage that adds to the request (the caller's middlewares
/// of both scopes, the interceptors, the access token, default headers, cookies,
/// `Accept-Encoding`), so its key is the request as it will be sent: calls whose credentials,
/// cookies or tenant differ, however they came to, never share. Only the trace context, which
/// is the call's own, is added after it.
struct CoalescingStage: Stage {
    let calls: InFlightCalls

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        // A keyed call is an operation of its own, whatever it shares with another.
        call.bufferLimit != nil && !call.isHedge && (request.method == .get || request.method == .head) && request.body == nil
            && request.sentIdempotencyKey == nil
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        guard let bufferLimit = call.bufferLimit else { return try await next(request, call) }
        let key = calls.key(for: request, bufferLimit: bufferLimit)
        while true {
            let outcome = try await calls.join(key, calledOffBy: call.cancellation) {
                call.observation?.resilienceEvent(.coalesced(origin: request.origin), for: request)
            }
            switch outcome {
            case .answered(let head, let body)?:
                return Response(head: head, body: ResponseBody(body))
            case .failed(let error)?:
                throw error
            case .abandoned?:
                // The caller whose request it was was cancelled: join, or lead, again.
                continue
            case nil:
                return try await lead(request, key: key, call: call, next: next, bufferLimit: bufferLimit)
            }
        }
    }

    /// Sends the request for every caller of `key`, and gives them its outcome.
    private func lead(_ request: Request, key: InFlightCalls.Key, call: CallContext, next: Next, bufferLimit: Int) async throws -> Response<ResponseBody> {
        do {
            let response = try await next(request, call)
            let body = try await response.body.collect(upTo: bufferLimit)
            calls.finish(key, with: .answered(response.head, body))
            return Response(head: response.head, body: ResponseBody(body))
        } catch {
            calls.finish(key, with: error is CancellationError || Task.isCancelled ? .abandoned : .failed(error))
            throw error
        }
    }
}
