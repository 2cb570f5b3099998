/// Runs the client's preconditions, then the request's, once per call: a failing one means
/// nothing is sent.
struct PreconditionStage: Stage {
    let preconditions: [RequestPrecondition]

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        !preconditions.isEmpty || !request.preconditions.isEmpty
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        for precondition in preconditions + request.preconditions {
            do {
                try await precondition.check(request)
            } catch {
                throw TrellisError.preconditionFailed(RequestCheckFailure(
                    name: precondition.name,
                    request: RequestLog.summary(request),
                    status: nil,
                    underlying: error
                ))
            }
        }
        return try await next(request, call)
    }
}
