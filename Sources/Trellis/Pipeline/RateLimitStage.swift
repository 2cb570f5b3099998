import Foundation
import Logging

/// Holds each request that leaves for the network until its key's turn under the client's
/// ``RateLimit``, refuses one whose turn is too far away, and learns from each answer when the
/// quota is spent. On every hop, after the cache and coalescing, so that only requests that go
/// out take a turn. With ``RateLimit/sharing``, the turns come from the store the fleet shares,
/// a batch at a time.
struct RateLimitStage: Stage {
    /// The turns kept in this process: all of them, or, with a shared limit, those taken
    /// while its store fails.
    let turns: KeyedStates<RateLimitTurns>
    /// With a shared limit, the turns taken from its store and not used yet.
    let sharedTurns: KeyedStates<SharedRateLimitTurns>?
    /// The client's clock, which turns are measured and waited on.
    let clock: any ClientClock
    let logger: Logger


    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let limit = turns.settings
        let key = limit.key(for: request)
        let origin = request.origin
        let wait: Duration
        if let sharing = limit.sharing, let sharedTurns {
            wait = try await sharedTurn(key, sharing, sharedTurns, request: request, call: call)
        } else {
            wait = try localTurn(key, request: request, call: call)
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
            if let sharing = limit.sharing, let sharedTurns {
                sharedTurns.update(key) { state in
                    while let first = state.turns.first, first < until { state.turns.removeFirst() }
                }
                // The other processes learn it through the store; the answer does not wait.
                Task { [clock, logger] in
                    do {
                        try await withTimeLimit(sharing.timeLimit, on: clock) { try await sharing.store.hold(key, for: spent, under: limit) }
                    } catch {
                        logger.warning("the rate limit's store did not take the hold of \(key): \(error)")
                    }
                }
            }
            call.observation?.resilienceEvent(
                .rateLimitSpent(origin: origin, key: key, until: clock.now.addingTimeInterval(spent.inSeconds)), for: request
            )
        }
        return response
    }

    /// How long until the request's turn among this process's own, or a refusal when that is
    /// longer than the limit waits.
    private func localTurn(_ key: String, request: Request, call: CallContext) throws -> Duration {
        let limit = turns.settings
        let now = clock.instant
        let turn = turns.update(key) { $0.take(at: now, limit) }
        guard let wait = turn.wait else { throw refusal(request, call, key: key, turnIn: turn.goesAt - now) }
        return wait
    }

    /// How long until the request's turn among those this process took from the store: the
    /// first it holds, or one of the batch it takes (once, for every caller that finds none).
    private func sharedTurn(
        _ key: String,
        _ sharing: RateLimitSharing,
        _ shared: KeyedStates<SharedRateLimitTurns>,
        request: Request,
        call: CallContext
    ) async throws -> Duration {
        let limit = turns.settings
        enum Step {
            case turn(ContinuousClock.Instant)
            case tooFar(ContinuousClock.Instant)
            case wait(Task<Void, Never>)
            case storeFailed(String)
        }
        // Whether this caller has waited for a batch: if that one failed, the caller is done with
        // the store, whatever `retryStoreAfter` says (at zero it would ask again, endlessly).
        var waitedForABatch = false
        while true {
            let now = clock.instant
            let step = shared.update(key) { [waitedForABatch] state -> Step in
                if let first = state.turns.first {
                    guard first - now <= limit.maximumWait else { return .tooFar(first) }
                    state.turns.removeFirst()
                    return .turn(first)
                }
                if let failure = state.storeFailure, waitedForABatch || failure.until > now { return .storeFailed(failure.detail) }
                if let fetch = state.fetch { return .wait(fetch) }
                let fetch = Task { await takeBatch(key, sharing, shared) }
                state.fetch = fetch
                return .wait(fetch)
            }
            switch step {
            case .turn(let goesAt):
                return max(.zero, goesAt - now)
            case .tooFar(let goesAt):
                throw refusal(request, call, key: key, turnIn: goesAt - now)
            case .wait(let fetch):
                await fetch.value
                waitedForABatch = true
                try Task.checkCancellation()
            case .storeFailed(let detail):
                call.observation?.resilienceEvent(
                    .sharedStateFailed(origin: request.origin, policy: "rate_limit", detail: detail), for: request
                )
                switch sharing.whenStoreFails {
                case .continueInProcess:
                    return try localTurn(key, request: request, call: call)
                case .refuseCalls:
                    let refusal = CallRefusal(
                        request: request, origin: request.origin, reason: .rateLimit, retryAt: nil,
                        detail: "the store \(key)'s quota is shared through failed: \(detail)"
                    )
                    call.observation?.resilienceEvent(.callRefused(refusal), for: request)
                    throw TrellisError.callRefused(refusal)
                }
            }
        }
    }

    /// Takes a batch of `key`'s turns from the store, within its time limit; on a failure,
    /// the store is left alone for a while.
    private func takeBatch(_ key: String, _ sharing: RateLimitSharing, _ shared: KeyedStates<SharedRateLimitTurns>) async {
        let limit = turns.settings
        let result: Result<[Duration], any Error>
        do {
            result = .success(try await withTimeLimit(sharing.timeLimit, on: clock) {
                try await sharing.store.takeTurns(sharing.batch, of: key, under: limit)
            })
        } catch {
            result = .failure(error)
        }
        let received = clock.instant
        let failure: String? = switch result {
        case .success(let waits) where waits.isEmpty: "it gave no turns"
        case .success: nil
        case .failure(let error): "\(error)"
        }
        shared.update(key) { state in
            state.fetch = nil
            if let failure {
                state.storeFailure = (received + sharing.retryStoreAfter, failure)
            } else if case .success(let waits) = result {
                state.storeFailure = nil
                for wait in waits.sorted() { state.turns.append(received + max(.zero, wait)) }
            }
        }
        if let failure {
            logger.warning("the rate limit's store failed to give turns of \(key) (\(failure)); it is asked again in \(sharing.retryStoreAfter), and until then \(sharing.whenStoreFails == .continueInProcess ? "this process keeps the quota alone" : "requests under it are refused")")
        }
    }

    private func refusal(_ request: Request, _ call: CallContext, key: String, turnIn ahead: Duration) -> TrellisError {
        let limit = turns.settings
        let refusal = CallRefusal(
            request: request, origin: request.origin, reason: .rateLimit, retryAt: clock.now.addingTimeInterval(ahead.inSeconds),
            detail: "\(key)'s turn is \(String(format: "%.1f", ahead.inSeconds)) s away, longer than the \(limit.maximumWait) it waits"
        )
        call.observation?.resilienceEvent(.callRefused(refusal), for: request)
        return TrellisError.callRefused(refusal)
    }
}
