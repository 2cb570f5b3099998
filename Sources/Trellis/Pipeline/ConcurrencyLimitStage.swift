/// Holds each attempt to the origin's ``ConcurrencyLimit``: it goes at once while there is
/// room, and otherwise waits in line for an attempt in flight to end.
struct ConcurrencyLimitStage: Stage {
    let origins: OriginRecords
    let limit: ConcurrencyLimit
    /// The client's clock, which the longest wait is measured on.
    let clock: any ClientClock

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let record = origins.record(of: request, call)
        try await enter(record, request: request, call: call)
        defer {
            // The place passes to the first waiter, if any, under the lock; it is resumed
            // outside.
            record.slots { $0.release() }?.continuation.resume()
        }
        return try await next(request, call)
    }

    /// Returns when the attempt has a place, or throws when it waited too long, found too many
    /// waiting, or was cancelled.
    private func enter(_ record: OriginRecord, request: Request, call: CallContext) async throws {
        let origin = record.origin
        // Room at once, the common case: one lock, nothing more.
        let waiterNumber = record.slots { state -> UInt64? in
            guard state.inFlight >= limit.maximumInFlight || !state.waiters.isEmpty else {
                state.inFlight += 1
                return nil
            }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        guard let id = waiterNumber else { return }

        enum Entry {
            case now, refused
            case queued(ahead: Int)
        }
        let tooLong = CallRefusal(
            request: request, origin: origin, reason: .concurrencyLimit, retryAt: nil,
            detail: "it waited \(limit.maximumWait) for one of the \(limit.maximumInFlight) calls in flight to end"
        )
        let tooMany = CallRefusal(
            request: request, origin: origin, reason: .concurrencyLimit, retryAt: nil,
            detail: "\(limit.maximumWaiting) calls were waiting already"
        )
        var timer: Task<Void, Never>?
        defer { timer?.cancel() }
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    // Looked at again, in the same lock as joining the line: a place may have
                    // come free since.
                    let entry = record.slots { state -> Entry in
                        if state.inFlight < limit.maximumInFlight, state.waiters.isEmpty {
                            state.inFlight += 1
                            return .now
                        }
                        guard state.waiters.count < limit.maximumWaiting else { return .refused }
                        state.waiters.append(.init(id: id, continuation: continuation))
                        return .queued(ahead: state.waiters.count - 1)
                    }
                    switch entry {
                    case .now:
                        continuation.resume()
                    case .refused:
                        continuation.resume(throwing: TrellisError.callRefused(tooMany))
                    case .queued(let ahead):
                        call.observation?.resilienceEvent(.concurrencyLimitReached(origin: origin, ahead: ahead), for: request)
                        // Cancelled before the handler below could find it in line.
                        if Task.isCancelled, let waiter = record.slots({ $0.removeWaiter(id) }) {
                            waiter.continuation.resume(throwing: CancellationError())
                            return
                        }
                        timer = Task { [clock] in
                            try? await clock.sleep(for: limit.maximumWait)
                            guard !Task.isCancelled else { return }
                            record.slots { $0.removeWaiter(id) }?.continuation.resume(throwing: TrellisError.callRefused(tooLong))
                        }
                    }
                }
            } onCancel: {
                record.slots { $0.removeWaiter(id) }?.continuation.resume(throwing: CancellationError())
            }
        } catch TrellisError.callRefused(let refusal) {
            call.observation?.resilienceEvent(.callRefused(refusal), for: request)
            throw TrellisError.callRefused(refusal)
        }
    }
}
