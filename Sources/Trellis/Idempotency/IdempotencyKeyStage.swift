import Logging

/// Keys a call that changes something (``IdempotencyKey-swift.struct``): draws its key once, puts it in the
/// request's field for every attempt below (retries, hedges, redirects, the replay after a
/// token refresh), and marks the request as one that may be sent again. While the server
/// answers `409 Conflict` (the first request with the key is still in progress), waits and
/// sends the call again, within ``IdempotencyKeySettings/inProgressWait``.
///
/// Once per call, near the top: the caller's middlewares see the key, and so do the events,
/// logs and archive of every attempt.
struct IdempotencyKeyStage: Stage {
    let settings: IdempotencyKeySettings
    /// Whether the client keys ``IdempotencyKeySettings/methods`` (its settings are set), or
    /// only the requests that carry a key of their own.
    let keysMethods: Bool
    let clock: any ClientClock
    let logger: Logger

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        request.idempotencyKey != nil || (keysMethods && settings.methods.contains(request.method))
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        var request = request
        let key = (request.idempotencyKey ?? .generated).draw()
        if let problem = IdempotencyKey.problem(with: key) {
            throw TrellisError.invalidRequest(InvalidRequest(.header(settings.fieldName.rawName), "\(problem); nothing was sent"))
        }
        request.headerFields[settings.fieldName] = settings.quotesKey ? "\"\(key)\"" : key
        request.sentIdempotencyKey = key
        var waited = Duration.zero
        var conflicts = 0
        while true {
            var response = try await next(request, call)
            response.sentIdempotencyKey = key
            guard response.status.code == 409, let wait = waitAfterConflict(response, number: conflicts, waited: waited),
                request.body?.isReplayable ?? true
            else { return response }
            await response.body.discard()
            conflicts += 1
            logger.debug("\(RequestLog.summary(request)): 409, the first request with idempotency key \(key) is in progress; sent again in \(wait)")
            call.observation?.retryScheduled(retry: conflicts, delay: wait, cause: .status(response.status), for: request)
            try await clock.sleep(for: wait)
            waited += wait
        }
    }

    /// How long to wait before sending the call again after its `number`th `409` (from 0):
    /// what `Retry-After` asks, else a wait that doubles from 100 ms up to 2 s; `nil` when that
    /// would pass the settings' longest wait.
    private func waitAfterConflict(_ response: Response<ResponseBody>, number: Int, waited: Duration) -> Duration? {
        let asked = response.headerFields[.retryAfter].flatMap { RetryAfter.delay($0, now: clock.now) }
        let wait = asked ?? Duration.milliseconds(100).doubled(number, atMost: .seconds(2))
        return waited + wait <= settings.inProgressWait ? wait : nil
    }
}
