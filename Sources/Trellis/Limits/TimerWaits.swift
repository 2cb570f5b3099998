import NIOConcurrencyHelpers
import NIOCore

/// Waits that many calls make at once, on one event-loop timer (``DeadlineTimer``): what
/// ``SystemClock/wait(for:)`` waits on. A call that starts or ends a wait touches only the
/// timer's lock, where `Task.sleep` would set and cancel a timer of the loop per call.
///
/// The timer is made on the first wait, so that a clock nobody waits on starts no event loop.
final class TimerWaits: Sendable {
    private let timer = NIOLockedValueBox<DeadlineTimer<Waiter>?>(nil)

    /// Returns once `duration` has passed, or as soon as the calling task is cancelled.
    func wait(for duration: Duration) async {
        let timer = self.timer.withLockedValue { timer in
            if let timer { return timer }
            let made = DeadlineTimer<Waiter> { _ = $0.end() }
            timer = made
            return made
        }
        let waiter = Waiter()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                waiter.start(continuation) { timer.watch(waiter, until: .now() + TimeAmount(duration)) }
            }
        } onCancel: {
            if let token = waiter.end() { timer.unwatch(token) }
        }
    }

    /// One wait: its continuation, resumed once, by the timer or by a cancellation, whichever
    /// comes first.
    final class Waiter: Sendable {
        private struct State {
            var continuation: CheckedContinuation<Void, Never>?
            var token: DeadlineTimer<Waiter>.Token?
            var ended = false
        }

        private let state = NIOLockedValueBox(State())

        /// Starts the wait with `watch`, unless it ended (was cancelled) before it could start.
        func start(_ continuation: CheckedContinuation<Void, Never>, watch: () -> DeadlineTimer<Waiter>.Token) {
            let endedAlready = state.withLockedValue { state in
                guard !state.ended else { return true }
                state.continuation = continuation
                state.token = watch()
                return false
            }
            if endedAlready { continuation.resume() }
        }

        /// Ends the wait, if it has not ended; returns the timer's token, for a cancellation to
        /// unwatch.
        @discardableResult
        func end() -> DeadlineTimer<Waiter>.Token? {
            let (continuation, token) = state.withLockedValue { state in
                defer {
                    state.ended = true
                    state.continuation = nil
                    state.token = nil
                }
                return (state.continuation, state.token)
            }
            continuation?.resume()
            return token
        }
    }
}
