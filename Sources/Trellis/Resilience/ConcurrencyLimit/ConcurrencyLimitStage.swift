/// Holds each attempt to the origin's ``ConcurrencyLimit``: it goes at once while there is
/// room, and otherwise waits in line for an attempt in flight to end.
struct ConcurrencyLimitStage: Stage {
    let limit: ConcurrencyLimit
    let context: PolicyContext
    private let slots: OriginStateKey<ConcurrencySlots>

    init(_ limit: ConcurrencyLimit, context: PolicyContext) {
        self.limit = limit
        self.context = context
        slots = OriginStateKey(limit)
    }

    var keepsStatePerOrigin: Bool { true }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let record = context.origins.record(of: request, call)
        try await enter(record, request: request, call: call)
        defer {
            // The place passes to the first waiter, if any, under the lock; it is resumed
            // outside.
            record.withState(slots) { $0.release() }?.continuation.resume()
        }
        return try await next(request, call)
    }

    /// Returns when the attempt has a place, or throws when it waited too long, found too many
    /// waiting, or was cancelled.
    private func enter(_ record: OriginRecord, request: Request, call: CallContext) async throws {
        let origin = record.origin
        // Room at once, the common case: one lock, nothing more.
        let waiterNumber = record.withState(slots) { state -> UInt64? in
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
        // Made (and reported) only when the attempt is refused.
        let tooLong = { @Sendable in
            context.refusal(
                request, call, origin: origin, reason: .concurrencyLimit,
                detail: "it waited \(limit.maximumWait) for one of the \(limit.maximumInFlight) calls in flight to end"
            )
        }
        let tooMany = {
            context.refusal(request, call, origin: origin, reason: .concurrencyLimit, detail: "\(limit.maximumWaiting) calls were waiting already")
        }
        var timer: Task<Void, Never>?
        defer { timer?.cancel() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Looked at again, in the same lock as joining the line: a place may have
                // come free since.
                let entry = record.withState(slots) { state -> Entry in
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
                    continuation.resume(throwing: tooMany())
                case .queued(let ahead):
                    context.report(.concurrencyLimitReached(origin: origin, ahead: ahead), request, call)
                    // Cancelled before the handler below could find it in line.
                    if Task.isCancelled, let waiter = record.withState(slots, { $0.removeWaiter(id) }) {
                        waiter.continuation.resume(throwing: CancellationError())
                        return
                    }
                    timer = Task { [clock = context.clock] in
                        try? await clock.sleep(for: limit.maximumWait)
                        guard !Task.isCancelled else { return }
                        record.withState(slots) { $0.removeWaiter(id) }?.continuation.resume(throwing: tooLong())
                    }
                }
            }
        } onCancel: {
            record.withState(slots) { $0.removeWaiter(id) }?.continuation.resume(throwing: CancellationError())
        }
    }
}
