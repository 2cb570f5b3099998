/// What a call carries through the pipeline beside the request the caller built: what the
/// client and its stages have decided for this call, for the stages (and the transport) after
/// them. A stage passes it on, changed or not, with the request.
struct CallContext: Sendable {
    /// For a buffered call, the most bytes its body may hold; `nil` for a streamed call.
    var bufferLimit: Int?
    /// The time limits and the body limit of the attempt under way, fixed by
    /// ``TimeLimitStage`` for each attempt; a redirect or a token replay of the attempt
    /// shares them.
    var limits: ExchangeLimits?
    /// The call's span and monitors, when anything observes it (``ObservationStage``).
    var observation: CallObservation?
    /// The origin the call was made to, once a redirect has taken it elsewhere: credentials
    /// given without an origin of their own are sent to it alone. `nil` on the first hop,
    /// whose origin is the request's.
    var origin: String?
    /// What the resilience policies keep about the call's origin, looked up once per call by
    /// ``RetryStage`` when the client has a policy that keeps one (``OriginRecords``).
    var originRecord: OriginRecord?
    /// For the first attempt of a hedged call, which runs in the caller's task, how a hedge
    /// that answers first calls it off (``HedgingStage``).
    var cancellation: AttemptCancellation?
    /// Whether this attempt is a hedge (``HedgingStage``): it sends a request of its own,
    /// never sharing one in flight (``CoalescingStage``), least of all its own call's.
    var isHedge = false
    /// For a call that ends in a connection of its own rather than the transport's (a
    /// WebSocket), the hosts that connection reaches for a request, which the plain-HTTP rule
    /// judges (``OriginPolicyStage``).
    var hostsReached: (@Sendable (Request) -> [String])?

    init(bufferLimit: Int? = nil) {
        self.bufferLimit = bufferLimit
    }

    /// The limits the transport is given: those of the attempt, or, for a pipeline without
    /// ``TimeLimitStage`` (a test's), the client's default timeouts from now.
    var limitsOfAttempt: ExchangeLimits {
        guard let limits else {
            var limits = ExchangeLimits(timeouts: Client.Configuration.Timeouts(), bufferLimit: bufferLimit)
            limits.cancellation = cancellation
            return limits
        }
        return limits
    }
}
