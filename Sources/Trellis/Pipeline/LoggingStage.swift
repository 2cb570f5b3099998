import Logging

/// Logs each hop at debug level, closest to the wire, with credentials redacted: what is
/// logged is what was sent.
struct LoggingStage: Stage {
    let logger: Logger

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        logger.debug("\(RequestLog.describe(request))", metadata: Self.metadata(request))
        let started = ContinuousClock.now
        do {
            let response = try await next(request, call)
            logger.debug(
                "\(RequestLog.describe(response.head, for: request, after: ContinuousClock.now - started))",
                metadata: Self.metadata(request)
            )
            return response
        } catch {
            logger.debug("\(RequestLog.summary(request)) failed: \(error)", metadata: Self.metadata(request))
            throw error
        }
    }

    /// The endpoint's name, when the request has one, so that log lines can be grouped by
    /// operation.
    private static func metadata(_ request: Request) -> Logger.Metadata? {
        request.endpointName.map { ["trellis.endpoint": .string($0)] }
    }
}
