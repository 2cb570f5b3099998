import AsyncHTTPClient

extension AsyncHTTPClientTransport {
    /// Lets a request that AsyncHTTPClient gave up on for want of a free connection go out
    /// again, at the start of the next round, if `deadline` allows: rethrows `error` otherwise,
    /// or if it is another error. An exchange sends in a loop with this in its `catch`.
    ///
    /// AsyncHTTPClient bounds a request's wait in its pool by the connect timeout (10 s by
    /// default), whatever the request's deadline: under load (more concurrent calls to a host
    /// than it keeps connections), a call with a minute to go failed after 10 s in the queue.
    /// Such a request never left the queue, so nothing of it was sent, not even the first byte
    /// of a streamed body, and sending it again is safe whatever its method.
    ///
    /// Each round lasts at least `minimumRound`: with a connect timeout of zero or near it,
    /// the pool gives up at once, and resending at once would spin until the deadline.
    static func waitForAConnection(
        after error: any Error,
        inRoundStartedAt started: ContinuousClock.Instant,
        until deadline: ContinuousClock.Instant,
        minimumRound: Duration = .milliseconds(100)
    ) async throws {
        guard let poolError = error as? HTTPClientError, poolError == .getConnectionFromPoolTimeout, .now < deadline else { throw error }
        let resend = min(started + minimumRound, deadline)
        if resend > .now { try await Task.sleep(until: resend, clock: .continuous) }
        guard .now < deadline else { throw error }
    }
}
