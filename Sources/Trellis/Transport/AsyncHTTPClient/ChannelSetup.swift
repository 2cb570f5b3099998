import NIOCore

extension Channel {
    /// Runs `work` on the channel's event loop, at once when already there: AsyncHTTPClient
    /// calls its connection and stream initializers on the loop, where a job of its own would
    /// only delay the connection's first request.
    func onItsLoop(_ work: @escaping @Sendable () throws -> Void) -> EventLoopFuture<Void> {
        eventLoop.inEventLoop ? eventLoop.makeCompletedFuture(withResultOf: work) : eventLoop.submit(work)
    }
}
