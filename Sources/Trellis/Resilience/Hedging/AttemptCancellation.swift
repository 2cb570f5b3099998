import NIOConcurrencyHelpers

/// A way to call off the first attempt of a hedged call, which runs in the caller's task,
/// without cancelling that task: when a hedge answers first (``HedgeRace``), the attempt's
/// exchange is cancelled, which closes its connection, and the attempt ends.
///
/// Swift cancels whole tasks only. A transport that can cancel an exchange of its own
/// (AsyncHTTPClient's buffered exchanges) is told through ``ExchangeLimits``; any other
/// exchange runs in a task of its own when it can be called off (``run(_:)``).
final class AttemptCancellation: Sendable {
    private struct State {
        var isCalledOff = false
        /// What cancels the exchange under way.
        var cancelExchange: (@Sendable () -> Void)?
    }

    private let state = NIOLockedValueBox(State())

    var isCalledOff: Bool { state.withLockedValue { $0.isCalledOff } }

    /// Calls the attempt off: its exchange, under way or still to come, is cancelled.
    func callOff() {
        let cancelExchange = state.withLockedValue { state in
            state.isCalledOff = true
            defer { state.cancelExchange = nil }
            return state.cancelExchange
        }
        cancelExchange?()
    }

    /// `exchange`, with `cancel` run if the attempt is called off before it returns (at once,
    /// if it has been already).
    func exchange<Value>(cancelledBy cancel: @escaping @Sendable () -> Void, _ exchange: () async throws -> Value) async throws -> Value {
        let isCalledOff = state.withLockedValue { state in
            if !state.isCalledOff { state.cancelExchange = cancel }
            return state.isCalledOff
        }
        if isCalledOff { cancel() }
        defer { state.withLockedValue { $0.cancelExchange = nil } }
        return try await exchange()
    }

    /// `exchange`, for a transport that cannot be told of the cancellation: in a task that is
    /// cancelled when the attempt is called off or the caller's task is cancelled. The task
    /// starts on the calling thread and runs there until it first has to wait.
    func run(
        _ exchange: sending @escaping @isolated(any) () async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        let task = Task.immediate(operation: exchange)
        return try await self.exchange(cancelledBy: { task.cancel() }) {
            try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        }
    }
}

extension ExchangeLimits {
    /// `operation`, with `onCancel` run when the calling task is cancelled, or when the attempt
    /// is called off because a hedge answered first.
    func withCancellationHandler<Value>(
        _ operation: () async throws -> Value,
        onCancel: @escaping @Sendable () -> Void
    ) async throws -> Value {
        guard let cancellation else {
            return try await withTaskCancellationHandler(operation: operation, onCancel: onCancel)
        }
        return try await cancellation.exchange(cancelledBy: onCancel) {
            try await withTaskCancellationHandler(operation: operation, onCancel: onCancel)
        }
    }
}
