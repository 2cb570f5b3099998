import NIOConcurrencyHelpers
import NIOCore
import Tracing

/// One attempt of a hedged call and the hedges sent after it, racing: the first answer wins,
/// and the other attempts are cancelled.
///
/// The first attempt runs in the caller's task, as it would without hedging; hedges run in
/// tasks of their own, started when the client's timer finds the delay passed
/// (``delayPassed()``). An attempt that answers in time, as most do, so costs a timer entry
/// and a few locks: hedging that never acts went from 15% of a loopback GET to 2.4% (A/B in
/// `Benchmarks/README.md`, "Hedging without a task per attempt"). A hedge that answers first calls the first attempt off
/// (``firstAttempt``), which cancels its exchange; the caller then gets the hedge's answer.
/// An attempt that fails, or answers with what the hedging's classifier counts as a failure,
/// ends the call only when no other is still out; when every attempt fails, the call ends as
/// its first attempt did.
final class HedgeRace: Sendable {
    /// How the first attempt is called off when a hedge answers first.
    let firstAttempt = AttemptCancellation()

    private struct State {
        /// Attempts that have neither answered nor failed.
        var attemptsOut = 1
        var hedgesSent = 0
        /// Whether the call has its answer, or its failure: later answers are discarded.
        var isDecided = false
        /// A hedge's answer, until the caller takes it.
        var hedgeAnswer: Response<ResponseBody>?
        /// How the call ends if every attempt fails: the first attempt's failure, or its answer
        /// that counts as one; taken once it is the call's.
        var failure: Result<Response<ResponseBody>, any Error>?
        var hedges: [Task<Void, Never>] = []
        /// The caller, once its own attempt has failed, waiting for a hedge to end.
        var waiting: CheckedContinuation<Response<ResponseBody>, any Error>?
        /// The delay being watched, until it passes or the call is decided.
        var delayWatch: DeadlineTimer<HedgeRace>.Token?
        /// The delay being waited on a clock other than the system's.
        var delayWait: Task<Void, Never>?
        /// Whether the caller's task is cancelled: no hedge is sent from then on.
        var isCancelled = false
    }

    private let state = NIOLockedValueBox(State())
    private let stage: HedgingStage
    private let origin: String
    private let delay: Duration
    private let request: Request
    private let call: CallContext
    private let next: Pipeline.Next
    /// The caller's task-local values that stages below read: a hedge's task sets them again.
    private let serviceContext: ServiceContext?
    private let refreshingLabel: String?

    init(_ stage: HedgingStage, origin: String, delay: Duration, request: Request, call: CallContext, next: Pipeline.Next) {
        self.stage = stage
        self.origin = origin
        self.delay = delay
        self.request = request
        var hedge = call
        hedge.isHedge = true
        self.call = hedge
        self.next = next
        serviceContext = ServiceContext.current
        refreshingLabel = AccessTokenAuthorizer.refreshingLabel
        state.withLockedValue { watchDelay(&$0) }
    }

    /// Starts the wait for the next hedge's delay: on the client's timer, or on its clock when
    /// that is not the system's.
    private func watchDelay(_ state: inout State) {
        guard stage.delaysOnTheEventLoop else {
            state.delayWait = Task { [clock = stage.clock, delay] in
                guard (try? await clock.sleep(for: delay)) != nil else { return }
                self.delayPassed()
            }
            return
        }
        state.delayWatch = stage.delays.watch(self, until: .now() + TimeAmount(delay))
    }

    /// The first attempt answered: its answer, or a hedge's that came first.
    func firstAnswered(_ response: Response<ResponseBody>, after latency: Duration) async throws -> Response<ResponseBody> {
        if isFailure(response) { return try await firstFailed(.success(response)) }
        let (hedgeAnswer, hedges) = state.withLockedValue { state -> (Response<ResponseBody>?, [Task<Void, Never>]) in
            state.attemptsOut -= 1
            if state.isDecided, let answer = state.hedgeAnswer {
                state.hedgeAnswer = nil
                return (answer, [])
            }
            decide(&state)
            return (nil, state.hedges)
        }
        if let hedgeAnswer {
            await response.body.discard()
            return hedgeAnswer
        }
        record(latency)
        for hedge in hedges { hedge.cancel() }
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
                    decide(&state)
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

    /// The caller's task is cancelled: so are the hedges, and none is sent any more.
    func cancel() {
        let hedges = state.withLockedValue { state in
            state.isCancelled = true
            state.delayWait?.cancel()
            return state.hedges
        }
        for hedge in hedges { hedge.cancel() }
    }

    /// From the client's timer: sends a hedge, unless the call is decided, every hedge has
    /// been sent, or the origin's retry budget refuses.
    func delayPassed() {
        enum Step { case none, refused(tokens: Double), send }
        let hedging = stage.hedging
        let step = state.withLockedValue { state -> Step in
            state.delayWatch = nil
            state.delayWait = nil
            guard !state.isDecided, !state.isCancelled, state.hedgesSent < hedging.maximumHedges else { return .none }
            if let budgets = stage.budgets, case let budget = budgets.retryAllowance(origin), !budget.allowed {
                return .refused(tokens: budget.tokens)
            }
            state.hedgesSent += 1
            state.attemptsOut += 1
            if state.hedgesSent < hedging.maximumHedges { watchDelay(&state) }
            return .send
        }
        switch step {
        case .none:
            return
        case .refused(let tokens):
            call.observation?.resilienceEvent(.retryRefusedByBudget(origin: origin, tokens: tokens), for: request)
        case .send:
            call.observation?.resilienceEvent(.hedgeSent(origin: origin, after: delay), for: request)
            // Started under the lock, so that whoever decides the call finds it to cancel.
            state.withLockedValue { state in
                guard !state.isDecided, !state.isCancelled else {
                    state.attemptsOut -= 1
                    return
                }
                state.hedges.append(Task { await self.sendHedge() })
            }
        }
    }

    private func sendHedge() async {
        let started = stage.clock.instant
        do {
            let response = try await AccessTokenAuthorizer.$refreshingLabel.withValue(refreshingLabel) {
                guard let serviceContext else { return try await next(request, call) }
                return try await ServiceContext.withValue(serviceContext) { try await next(request, call) }
            }
            await hedgeAnswered(response, after: stage.clock.instant - started)
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
        let won = state.withLockedValue { state -> (waiting: CheckedContinuation<Response<ResponseBody>, any Error>?, hedges: [Task<Void, Never>])? in
            state.attemptsOut -= 1
            guard !state.isDecided else { return nil }
            decide(&state)
            defer { state.waiting = nil }
            // The caller is still in its own attempt: it takes the answer when that ends.
            if state.waiting == nil { state.hedgeAnswer = response }
            return (state.waiting, state.hedges)
        }
        guard let won else {
            await response.body.discard()
            return
        }
        record(latency)
        firstAttempt.callOff()
        for hedge in won.hedges { hedge.cancel() }
        won.waiting?.resume(returning: response)
    }

    /// A hedge failed: when it was the last attempt out and the caller's own has failed, the
    /// call ends as that one did.
    private func hedgeFailed() {
        let waiting = state.withLockedValue { state -> (CheckedContinuation<Response<ResponseBody>, any Error>, Result<Response<ResponseBody>, any Error>)? in
            state.attemptsOut -= 1
            guard state.attemptsOut == 0, !state.isDecided, let waiting = state.waiting, let failure = state.failure else { return nil }
            decide(&state)
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

    /// Marks the call decided, and stops watching its delay.
    private func decide(_ state: inout State) {
        state.isDecided = true
        if let watch = state.delayWatch { stage.delays.unwatch(watch) }
        state.delayWatch = nil
        state.delayWait?.cancel()
        state.delayWait = nil
    }

    private func record(_ latency: Duration) {
        if case .percentile = stage.hedging.delay { stage.latencies.update(origin) { $0.record(latency) } }
    }
}
