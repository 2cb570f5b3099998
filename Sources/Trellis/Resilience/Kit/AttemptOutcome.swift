public import HTTPTypes

/// How one attempt of a call ended, as the resilience policies see it: what a
/// ``FailureClassifier`` judges.
///
/// An attempt is one trip down the pipeline below the retries: the first send of a call, a
/// retry, or a hedge. The policies see it before its body is decoded, so a decoding failure is
/// not an outcome; judge such an answer by its status or fields instead.
public enum AttemptOutcome: Sendable {
    /// The server answered; its head, with the status and fields.
    case answered(HTTPResponse)
    /// The attempt failed with `error`. `wasSent` is `false` when the client itself stopped it
    /// before anything left (a circuit breaker, the shared pause or the concurrency limit
    /// refused it, or the request was invalid), and `true` when some of it may have reached the
    /// network.
    case failed(TrellisError, wasSent: Bool)

    /// The answer's status, or `nil` for a failed attempt.
    public var status: HTTPResponse.Status? {
        if case .answered(let head) = self { return head.status }
        return nil
    }

    /// The failure, or `nil` for an answer.
    public var error: TrellisError? {
        if case .failed(let error, _) = self { return error }
        return nil
    }

    /// The outcome of an attempt that threw `error`, or `nil` when the error is not one of
    /// Trellis's (a cancellation, a middleware's own), which no policy counts.
    init?(failure error: any Error) {
        guard let error = error as? TrellisError else { return nil }
        switch error {
        case .callRefused, .invalidRequest: self = .failed(error, wasSent: false)
        default: self = .failed(error, wasSent: true)
        }
    }

    /// Whether some of the attempt may have reached the network: an answer, or a failure that
    /// was sent.
    var wasSent: Bool {
        if case .failed(_, false) = self { return false }
        return true
    }
}
