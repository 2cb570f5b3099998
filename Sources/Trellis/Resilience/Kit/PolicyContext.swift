import Foundation
import Logging

/// What every resilience policy's stage is made with: built once in
/// ``Pipeline/stages(for:)`` and handed to each (as Polly's strategy builders hand each strategy
/// its context). A policy reads time, decides which attempts failed, keeps what it learns of an
/// origin, reports and refuses through it, and never by itself: so each does so the same way,
/// and a test that sets the client's clock or classifier sets it for all of them.
struct PolicyContext: Sendable {
    /// The client's clock, which every wait, cool-down and pause is measured on. Its
    /// ``ClientClock/wait(for:)`` is the shared timer for the waits many calls make at once.
    let clock: any ClientClock
    let logger: Logger
    /// The client's classifier, for the policies without one of their own.
    let clientFailures: FailureClassifier?
    /// The client's retry policy, whose rule the retry budget counts by when nothing else is set.
    let retry: RetryPolicy
    /// What the client's policies keep per origin, each under the type of its state.
    let origins: OriginRecords

    /// A context on `clock`; a test's stages take the defaults.
    init(
        clock: any ClientClock = SystemClock(),
        logger: Logger = Logger(label: "Trellis"),
        clientFailures: FailureClassifier? = nil,
        retry: RetryPolicy = .none,
        origins: OriginRecords? = nil
    ) {
        self.clock = clock
        self.logger = logger
        self.clientFailures = clientFailures
        self.retry = retry
        self.origins = origins ?? OriginRecords(clock: clock)
    }

    /// What `policy` counts as a failure: its own classifier, else the client's, else its
    /// built-in rule; `nil` when it has none of the three.
    func failures(of policy: some FailureCountingPolicy) -> FailureClassifier? {
        policy.failureClassifier ?? clientFailures ?? policy.builtInFailures
    }

    /// What `policy` counts as a failure by itself: its own classifier, else its built-in rule.
    /// The retry budget counts by the call's retry policy this way when neither the budget nor
    /// the client sets a classifier.
    func ownFailures(of policy: some FailureCountingPolicy) -> FailureClassifier? {
        policy.failureClassifier ?? policy.builtInFailures
    }

    /// The date `span` from now on the client's clock, as refusals and events name it.
    func date(in span: Duration) -> Date {
        clock.now.addingTimeInterval(span.inSeconds)
    }

    /// Reports `event` to the call's monitors, spans and metrics.
    func report(_ event: ResilienceEvent, _ request: Request, _ call: CallContext) {
        call.observation?.resilienceEvent(event, for: request)
    }

    /// The one way a policy refuses a call: the refusal is reported, and returned to be thrown.
    func refusal(
        _ request: Request,
        _ call: CallContext,
        origin: String,
        reason: CallRefusal.Reason,
        retryAt: Date? = nil,
        detail: String
    ) -> TrellisError {
        let refusal = CallRefusal(request: request, origin: origin, reason: reason, retryAt: retryAt, detail: detail)
        report(.callRefused(refusal), request, call)
        return TrellisError.callRefused(refusal)
    }

    /// The storage a policy shares its state through failed, as `detail` says: reported, and
    /// then, as the sharing's ``SharedStateSettings/whenStorageFails`` says, the call goes on with this process's
    /// state (this returns) or is refused (this throws, saying what is unknown).
    func sharedStateFailed(
        _ detail: String,
        policy: String,
        settings: SharedStateSettings,
        unknown: String,
        reason: CallRefusal.Reason,
        _ request: Request,
        _ call: CallContext,
        origin: String
    ) throws {
        report(.sharedStateFailed(origin: origin, policy: policy, detail: detail), request, call)
        guard settings.whenStorageFails == .refuseCalls else { return }
        throw refusal(request, call, origin: origin, reason: reason, detail: "\(unknown) unknown, their store failed: \(detail)")
    }
}

/// A policy's settings that say which attempts it counts as failures; the
/// ``PolicyContext`` resolves them against the client's classifier.
protocol FailureCountingPolicy {
    /// The policy's own classifier, which overrides the client's.
    var failureClassifier: FailureClassifier? { get }
    /// The rule when neither the policy nor the client sets one; `nil` when the policy has
    /// none (every answer wins a hedge race, say).
    var builtInFailures: FailureClassifier? { get }
}
