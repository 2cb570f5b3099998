import NIOConcurrencyHelpers

/// One attempt of a hedged call and the hedges sent after it, racing: the first answer wins,
/// and the other attempts are cancelled.
///
/// The first attempt runs in the caller's task, as it would without hedging. Beside it, a task
/// the caller makes (``sendHedges()``) waits out the delay, on the client's clock's shared timer, and sends
/// each hedge as a child task of its own: made by the caller, it has the caller's task-local
/// values and priority, and so does every hedge. The caller cancels it when the call is
/// decided or cancelled, which ends its wait and any hedge still out. It is not a child task
/// of the call, because the call would then wait for it to end: two more executor hops per
/// call, 11% of a loopback GET against 5% (`Benchmarks/README.md`, "Hedges that see the
/// caller's task-local values").
///
/// A hedge that answers first calls the first attempt off (``firstAttempt``), which cancels
/// its exchange; the caller then gets the hedge's answer. An attempt that fails, or answers
/// with what the hedging's classifier counts as a failure, ends the call only when no other is
/// still out; when every attempt fails, the call ends as its first attempt did.
final class HedgeRace: Sendable {
    /// How the first attempt is called off when a hedge answers first.
    let firstAttempt = AttemptCancellation()

    private struct State {
        /// Attempts that have neither answered nor failed.
        var attemptsOut = 1
        /// Whether the call has its answer, or its failure: later answers are discarded.
        var isDecided = false
        /// A hedge's answer, until the caller takes it.
        var hedgeAnswer: Response<ResponseBody>?
        /// How the call ends if every attempt fails: the first attempt's failure, or its answer
        /// that counts as one; taken once it is the call's.
        var failure: Result<Response<ResponseBody>, any Error>?
        /// The caller, once its own attempt has failed, waiting for a hedge to end.
        var waiting: CheckedContinuation<Response<ResponseBody>, any Error>?
    }

    private let state = NIOLockedValueBox(State())
    private let stage: HedgingStage
    private let record: OriginRecord
    private let delay: Duration
    private let request: Request
    private let call: CallContext
    private let next: Pipeline.Next

    init(_ stage: HedgingStage, record: OriginRecord, delay: Duration, request: Request, call: CallContext, next: Pipeline.Next) {
        self.stage = stage
        self.record = record
        self.delay = delay
        self.request = request
        var hedge = call
        hedge.isHedge = true
        self.call = hedge
        self.next = next
    }

    /// The first attempt answered: its answer, or a hedge's that came first.
    func firstAnswered(_ response: Response<ResponseBody>, after latency: Duration) async throws -> Response<ResponseBody> {
        if isFailure(response) { return try await firstFailed(.success(response)) }
        let hedgeAnswer = state.withLockedValue { state -> Response<ResponseBody>? in
            state.attemptsOut -= 1
            if state.isDecided, let answer = state.hedgeAnswer {
                state.hedgeAnswer = nil
                return answer
            }
            state.isDecided = true
            return nil
        }
        if let hedgeAnswer {
            await response.body.discard()
            return hedgeAnswer
        }
        noteAnswerTime(latency)
        return response
    }

    /// The first attempt failed: a hedge's answer, or the failure once no hedge is out.
    func firstFailed(_ error: any Error) async throws -> Response<ResponseBody> {
        try await firstFailed(.failure(error))
    }

    /// The first attempt failed, with an error or an answer that counts as a failure.
    private func firstFailed(_ outcome: Result<Response<ResponseBody>, any Error>) async throws -> Response<ResponseBody> {
        let answer = try await withCheckedThrowingContinuation { continuation in
            let result = state.withLockedValue { state -> Result<Response<ResponseBody>, any Error>? in
                state.attemptsOut -= 1
                // The first attempt's failure is the call's, whatever a hedge's was.
                state.failure = outcome
                if let answer = state.hedgeAnswer {
                    state.hedgeAnswer = nil
                    return .success(answer)
                }
                guard state.attemptsOut > 0 else {
                    state.isDecided = true
                    state.failure = nil
                    return outcome
                }
                state.waiting = continuation
                return nil
            }
            if let result { continuation.resume(with: result) }
        }
        // A hedge's answer won: the first attempt's, if it answered, is not needed.
        let unused = state.withLockedValue { state in
            defer { state.failure = nil }
            return state.failure
        }
        if case .success(let losing) = unused { await losing.body.discard() }
        return answer
    }

    /// The hedges, each after the delay from the previous one, each a child task; until the
    /// call is decided, every hedge has been sent, the origin's retry budget refuses, or this
    /// task is cancelled (the caller's way of ending it).
    func sendHedges() async {
        // The group only once a hedge goes: most calls are decided before the delay.
        await delayPasses()
        guard !Task.isCancelled, admitHedge() else { return }
        await withDiscardingTaskGroup { hedges in
            hedges.addTask { await self.sendHedge() }
            for _ in 1..<stage.hedging.maximumHedges {
                await delayPasses()
                guard !Task.isCancelled, admitHedge() else { return }
                hedges.addTask { await self.sendHedge() }
            }
        }
    }

    /// Returns when the delay has passed, or this task is cancelled: on the clock's shared
    /// timer, where a sleep per call would set a timer per call.
    private func delayPasses() async {
        await stage.context.clock.wait(for: delay)
    }

    /// Whether a hedge may go now: the call is not decided and the origin's retry budget
    /// allows it. A hedge admitted is out, and reported.
    private func admitHedge() -> Bool {
        enum Step { case none, refused(tokens: Double), send }
        let step = state.withLockedValue { state -> Step in
            guard !state.isDecided else { return .none }
            if let budget = stage.budget, case let allowance = record.retryAllowance(budget), !allowance.allowed {
                return .refused(tokens: allowance.tokens)
            }
            state.attemptsOut += 1
            return .send
        }
        switch step {
        case .none:
            return false
        case .refused(let tokens):
            stage.context.report(.retryRefusedByBudget(origin: record.origin, tokens: tokens), request, call)
            return false
        case .send:
            stage.context.report(.hedgeSent(origin: record.origin, after: delay), request, call)
            return true
        }
    }

    private func sendHedge() async {
        let started = stage.context.clock.instant
        do {
            let response = try await next(request, call)
            await hedgeAnswered(response, after: stage.context.clock.instant - started)
        } catch {
            hedgeFailed()
        }
    }

    private func hedgeAnswered(_ response: Response<ResponseBody>, after latency: Duration) async {
        if isFailure(response) {
            await response.body.discard()
            hedgeFailed()
            return
        }
        let (won, waiting) = state.withLockedValue { state -> (Bool, CheckedContinuation<Response<ResponseBody>, any Error>?) in
            state.attemptsOut -= 1
            guard !state.isDecided else { return (false, nil) }
            state.isDecided = true
            defer { state.waiting = nil }
            // The caller is still in its own attempt: it takes the answer when that ends.
            if state.waiting == nil { state.hedgeAnswer = response }
            return (true, state.waiting)
        }
        guard won else {
            await response.body.discard()
            return
        }
        noteAnswerTime(latency)
        firstAttempt.callOff()
        waiting?.resume(returning: response)
    }

    /// A hedge failed: when it was the last attempt out and the caller's own has failed, the
    /// call ends as that one did.
    private func hedgeFailed() {
        let waiting = state.withLockedValue { state -> (CheckedContinuation<Response<ResponseBody>, any Error>, Result<Response<ResponseBody>, any Error>)? in
            state.attemptsOut -= 1
            guard state.attemptsOut == 0, !state.isDecided, let waiting = state.waiting, let failure = state.failure else { return nil }
            state.isDecided = true
            state.waiting = nil
            state.failure = nil
            return (waiting, failure)
        }
        if let (continuation, failure) = waiting { continuation.resume(with: failure) }
    }

    /// Whether `response` does not win while another attempt is out.
    private func isFailure(_ response: Response<ResponseBody>) -> Bool {
        stage.failures?.isFailure(.answered(response.head)) ?? false
    }

    private func noteAnswerTime(_ latency: Duration) {
        if case .percentile = stage.hedging.delay { record.withState(stage.latencies) { $0.record(latency) } }
    }
}
