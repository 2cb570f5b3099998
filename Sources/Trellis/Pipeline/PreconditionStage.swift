/// Runs the client's preconditions, then the request's, once per call: a failing one means
/// nothing is sent.
struct PreconditionStage: OptionalStage {
    let preconditions: [RequestPrecondition]

    func isNeeded(for request: Request) -> Bool {
        !preconditions.isEmpty || !request.preconditions.isEmpty
    }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        let requestPreconditions = request.preconditions
        if preconditions.isEmpty && requestPreconditions.isEmpty { return try await next(request) }
        for precondition in preconditions + requestPreconditions {
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
        return try await next(request)
    }
}
