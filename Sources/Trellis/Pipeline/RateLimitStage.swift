import Foundation

/// Holds each request that leaves for the network until its key's turn under the client's
/// ``RateLimit``, refuses one whose turn is too far away, and learns from each answer when the
/// quota is spent. On every hop, after the cache and coalescing, so that only requests that go
/// out take a turn.
struct RateLimitStage: Stage {
    let turns: KeyedStates<RateLimitTurns>
    /// The client's clock, which turns are measured and waited on.
    let clock: any ClientClock

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let limit = turns.settings
        let key = limit.key(for: request)
        let origin = request.origin
        let now = clock.instant
        let turn = turns.update(key) { $0.take(at: now, limit) }
        guard let wait = turn.wait else {
            let ahead = turn.goesAt - now
            let refusal = CallRefusal(
                request: request, origin: origin, reason: .rateLimit, retryAt: clock.now.addingTimeInterval(ahead.inSeconds),
                detail: "\(key)'s turn is \(String(format: "%.1f", ahead.inSeconds)) s away, longer than the \(limit.maximumWait) it waits"
            )
            call.observation?.resilienceEvent(.callRefused(refusal), for: request)
            throw TrellisError.callRefused(refusal)
        }
        if wait > .zero {
            call.observation?.resilienceEvent(
                .waitedForRateLimit(origin: origin, key: key, until: clock.now.addingTimeInterval(wait.inSeconds)), for: request
            )
            try await clock.sleep(for: wait)
        }
        let response = try await next(request, call)
        if let spent = RateLimitFields.spentFor(response.head, now: clock.now) {
            let until = clock.instant + spent
            turns.update(key) { $0.hold(until: until, limit) }
            call.observation?.resilienceEvent(
                .rateLimitSpent(origin: origin, key: key, until: clock.now.addingTimeInterval(spent.inSeconds)), for: request
            )
        }
        return response
    }
}
