import Foundation

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
    let context: PolicyContext

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let limit = turns.settings
        let key = limit.key(for: request)
        let origin = request.origin
        let clock = context.clock
        let wait: Duration
        if let sharing = limit.sharing, let sharedTurns {
            wait = try await sharedTurn(key, sharing, sharedTurns, request: request, call: call)
        } else {
            wait = try localTurn(key, request: request, call: call)
        }
        if wait > .zero {
            context.report(.waitedForRateLimit(origin: origin, key: key, until: context.date(in: wait)), request, call)
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
                Task { [logger = context.logger] in
                    do {
                        try await withTimeLimit(sharing.settings.timeLimit, on: clock) { try await sharing.storage.hold(key, for: spent, under: limit) }
                    } catch {
                        logger.warning("the rate limit's store did not take the hold of \(key): \(error)")
                    }
                }
            }
            context.report(.rateLimitSpent(origin: origin, key: key, until: context.date(in: spent)), request, call)
        }
        return response
    }

    /// How long until the request's turn among this process's own, or a refusal when that is
    /// longer than the limit waits.
    private func localTurn(_ key: String, request: Request, call: CallContext) throws -> Duration {
        let limit = turns.settings
        let now = context.clock.instant
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
        // the store, whatever `retryStorageAfter` says (at zero it would ask again, endlessly).
        var waitedForABatch = false
        while true {
            let now = context.clock.instant
            let step = shared.update(key) { [waitedForABatch] state -> Step in
                if let first = state.turns.first {
                    guard first - now <= limit.maximumWait else { return .tooFar(first) }
                    state.turns.removeFirst()
                    return .turn(first)
                }
                if let failure = state.store.failure(at: now, waitedAlready: waitedForABatch) { return .storeFailed(failure) }
                return .wait(state.store.join { Task { await takeBatch(key, sharing, shared) } })
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
                try context.sharedStateFailed(
                    detail, policy: "rate_limit", settings: sharing.settings,
                    unknown: "the turns of \(key)'s shared quota are", reason: .rateLimit, request, call, origin: request.origin
                )
                return try localTurn(key, request: request, call: call)
            }
        }
    }

    /// Takes a batch of `key`'s turns from the store, within its time limit; on a failure,
    /// the store is left alone for a while.
    private func takeBatch(_ key: String, _ sharing: RateLimitSharing, _ shared: KeyedStates<SharedRateLimitTurns>) async {
        let limit = turns.settings
        let result: Result<[Duration], any Error>
        do {
            result = .success(try await withTimeLimit(sharing.settings.timeLimit, on: context.clock) {
                try await sharing.storage.takeTurns(sharing.batch, of: key, under: limit)
            })
        } catch {
            result = .failure(error)
        }
        let received = context.clock.instant
        let failure: String? = switch result {
        case .success(let waits) where waits.isEmpty: "it gave no turns"
        case .success: nil
        case .failure(let error): "\(error)"
        }
        shared.update(key) { state in
            state.store.finished(failure: failure, at: received, retryAfter: sharing.settings.retryStorageAfter)
            if failure == nil, case .success(let waits) = result {
                for wait in waits.sorted() { state.turns.append(received + max(.zero, wait)) }
            }
        }
        if let failure {
            context.logger.warning("the rate limit's store failed to give turns of \(key) (\(failure)); it is asked again in \(sharing.settings.retryStorageAfter), and until then \(sharing.settings.whenStorageFails == .continueInProcess ? "this process keeps the quota alone" : "requests under it are refused")")
        }
    }

    private func refusal(_ request: Request, _ call: CallContext, key: String, turnIn ahead: Duration) -> TrellisError {
        context.refusal(
            request, call, origin: request.origin, reason: .rateLimit, retryAt: context.date(in: ahead),
            detail: "\(key)'s turn is \(String(format: "%.1f", ahead.inSeconds)) s away, longer than the \(turns.settings.maximumWait) it waits"
        )
    }
}
