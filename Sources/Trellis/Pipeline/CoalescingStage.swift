/// Lets identical buffered `GET` and `HEAD` calls in flight together share one request
/// (``Coalescing``): the first goes on down the pipeline, the others wait for its response.
struct CoalescingStage: Stage {
    let calls: InFlightCalls

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        call.bufferLimit != nil && (request.method == .get || request.method == .head) && request.body == nil
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        guard let bufferLimit = call.bufferLimit else { return try await next(request, call) }
        let key = calls.key(for: request, bufferLimit: bufferLimit)
        while true {
            let outcome = try await calls.join(key) {
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
