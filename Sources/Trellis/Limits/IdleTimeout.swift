import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Ends a streamed body (a download, an event stream, a body being discarded) with
/// ``TrellisError/timedOut(_:)`` when no byte arrives for the idle timeout while someone is
/// waiting for one (see ``ExchangeLimits/watchingIdleTime(_:of:)``).
enum IdleTimeout {
    static func watching(_ body: ResponseBody, for idleTimeout: Duration, of request: Request) -> ResponseBody {
        // The error is written only if the time runs out: most streams never need it.
        let failure: @Sendable () -> TrellisError = {
            .timedOut(TimeoutFailure(timeout: idleTimeout, request: RequestLog.summary(request), waitingFor: "the next byte of the body"))
        }
        return ResponseBody(expectedLength: body.expectedLength) {
            let watch = IdleWatch(inner: body.makeAsyncIterator(), failure: failure, idleTimeout: idleTimeout)
            return ChunkIterator { try await watch.next() }
        }
    }
}

/// The reading side of a watched body. The body is read by a task of its own (the pump),
/// one chunk each time the reader asks, so that a wait can be abandoned: cancelling the pump
/// is what makes a transport close the connection. Dropping the reader stops the pump.
private final class IdleWatch: Sendable {
    private let handoff: Handoff

    init(inner: ChunkIterator, failure: @escaping @Sendable () -> TrellisError, idleTimeout: Duration) {
        handoff = Handoff(inner: inner, failure: failure, idleTimeout: idleTimeout)
    }

    deinit {
        handoff.stop(with: CancellationError())
    }

    func next() async throws -> ByteBuffer? {
        try await handoff.next()
    }
}

/// A one-chunk handoff between the pump and the reader, with the idle timer.
///
/// The idle time is counted from when the pump asks the transport for a chunk, not from when
/// the reader asks the pump: on a loaded machine the pump's task may wait seconds for a
/// thread, and that wait is not the server's silence. A chunk that is already there is
/// handed over whatever the load.
///
/// One timer serves the whole body rather than one per read: setting a timer from off the
/// event loop and cancelling it are each a job for that loop, and a small body is read twice
/// (its chunk, then its end), on every call that streams. The timer is set when the pump
/// begins to wait and none is set, and left running when a chunk comes. When it fires, it
/// ends the body if the pump's wait began a whole idle timeout ago, sets itself again for
/// when that wait would time out, or lapses if the pump is not waiting. It is cancelled when
/// the body ends.
private final class Handoff: Sendable {
    private struct State {
        /// The body, until the pump starts and takes it.
        var inner: Transfer<ChunkIterator>?
        var pump: Task<Void, Never>?
        /// The pump, waiting to be asked for a chunk; resumed with `false` to stop.
        var demand: CheckedContinuation<Bool, Never>?
        var reader: CheckedContinuation<ByteBuffer?, any Error>?
        /// When the pump began to wait for the transport's next chunk.
        var waitingSince: NIODeadline?
        var timer: NIOScheduledCallback?
        /// How the body ended: `nil` while it goes on, `.success` at its end.
        var outcome: Result<Void, any Error>?
    }

    private let state: NIOLockedValueBox<State>
    private let failure: @Sendable () -> TrellisError
    private let idleTimeout: Duration

    init(inner: ChunkIterator, failure: @escaping @Sendable () -> TrellisError, idleTimeout: Duration) {
        state = NIOLockedValueBox(State(inner: Transfer(value: inner)))
        self.failure = failure
        self.idleTimeout = idleTimeout
    }

    func next() async throws -> ByteBuffer? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (reader: CheckedContinuation<ByteBuffer?, any Error>) in
                enum Action { case finish(Result<Void, any Error>), start(Transfer<ChunkIterator>), ask(CheckedContinuation<Bool, Never>?) }
                let action = state.withLockedValue { state -> Action in
                    if let outcome = state.outcome { return .finish(outcome) }
                    state.reader = reader
                    if let inner = state.inner {
                        state.inner = nil
                        return .start(inner)
                    }
                    defer { state.demand = nil }
                    return .ask(state.demand)
                }
                switch action {
                case .finish(let outcome):
                    reader.resume(with: outcome.map { _ in nil })
                case .start(let inner):
                    let pump = Task { await self.pump(inner) }
                    let stopped = state.withLockedValue { state in
                        state.pump = pump
                        return state.outcome != nil
                    }
                    if stopped { pump.cancel() }
                case .ask(let demand):
                    demand?.resume(returning: true)
                }
            }
        } onCancel: {
            stop(with: CancellationError())
        }
    }

    /// The idle timer, firing at `deadline` on `loop`; `nil` when the loop is shutting down,
    /// and the process with it (a later read tries again).
    ///
    /// A scheduled callback rather than a scheduled task: the loop keeps the small handler,
    /// where a task cost a promise and closures each time the timer was set.
    private func arm(on loop: any EventLoop, at deadline: NIODeadline) -> NIOScheduledCallback? {
        try? loop.scheduleCallback(at: deadline, handler: Expiry(handoff: self))
    }

    private struct Expiry: NIOScheduledCallbackHandler, Sendable {
        let handoff: Handoff

        func handleScheduledCallback(eventLoop: some EventLoop) {
            handoff.expire(on: eventLoop)
        }
    }

    /// The timer fired: the body ends if the pump has waited the whole idle timeout.
    ///
    /// The decision and the end are taken under one hold of the lock: a chunk handed over in
    /// between would otherwise reach its reader and the body be ended after all.
    private func expire(on loop: any EventLoop) {
        let stopped = state.withLockedValue { state -> (State, TrellisError)? in
            guard state.outcome == nil, let waitingSince = state.waitingSince else {
                state.timer = nil
                return nil
            }
            let due = waitingSince + TimeAmount(idleTimeout)
            guard NIODeadline.now() >= due else {
                // On the timer's own loop, so setting it again sends no job to a loop.
                state.timer = arm(on: loop, at: due)
                return nil
            }
            // Written only now: most firings find the read answered, or one still in time.
            let error = failure()
            return (Self.end(&state, with: error), error)
        }
        if let (before, error) = stopped { Self.finish(before, with: error) }
    }

    /// Ends the body: the reader (if waiting) gets `error`, the pump is cancelled, and every
    /// later read gets `error` too. Nothing happens once the body has ended.
    func stop(with error: any Error) {
        let stopped = state.withLockedValue { state in
            state.outcome == nil ? Self.end(&state, with: error) : nil
        }
        if let stopped { Self.finish(stopped, with: error) }
    }

    /// Marks the body ended with `error`, returning what was waiting on it.
    private static func end(_ state: inout State, with error: any Error) -> State {
        let before = state
        state.outcome = .failure(error)
        (state.inner, state.reader, state.demand, state.timer, state.waitingSince) = (nil, nil, nil, nil, nil)
        return before
    }

    /// Outside the lock: stops the timer and the pump, and tells whoever waited.
    private static func finish(_ stopped: State, with error: any Error) {
        stopped.timer?.cancel()
        stopped.pump?.cancel()
        stopped.demand?.resume(returning: false)
        stopped.reader?.resume(throwing: error)
    }

    private func pump(_ transfer: Transfer<ChunkIterator>) async {
        var inner = transfer.value
        while true {
            let started = state.withLockedValue { state -> Bool in
                guard state.outcome == nil else { return false }
                let now = NIODeadline.now()
                state.waitingSince = now
                if state.timer == nil {
                    state.timer = arm(on: MultiThreadedEventLoopGroup.singleton.any(), at: now + TimeAmount(idleTimeout))
                }
                return true
            }
            guard started else { return }
            let result: Result<ByteBuffer?, any Error>
            do {
                result = .success(try await inner.next())
            } catch {
                result = .failure(error)
            }
            let (reader, timer) = state.withLockedValue { state -> (CheckedContinuation<ByteBuffer?, any Error>?, NIOScheduledCallback?) in
                if state.outcome == nil {
                    switch result {
                    case .success(nil): state.outcome = .success(())
                    case .failure(let error): state.outcome = .failure(error)
                    case .success: break
                    }
                }
                defer { (state.reader, state.waitingSince) = (nil, nil) }
                // The timer stays for the next read while the body goes on.
                guard state.outcome != nil else { return (state.reader, nil) }
                defer { state.timer = nil }
                return (state.reader, state.timer)
            }
            timer?.cancel()
            reader?.resume(with: result)
            guard case .success(.some) = result else { return }
            let more = await withCheckedContinuation { (demand: CheckedContinuation<Bool, Never>) in
                let proceed = state.withLockedValue { state -> Bool? in
                    guard state.outcome == nil else { return false }
                    if state.reader != nil { return true }
                    state.demand = demand
                    return nil
                }
                if let proceed { demand.resume(returning: proceed) }
            }
            guard more else { return }
        }
    }
}

/// Hands a value that is not `Sendable` to the one task that uses it from then on.
private struct Transfer<Value>: @unchecked Sendable {
    let value: Value
}
