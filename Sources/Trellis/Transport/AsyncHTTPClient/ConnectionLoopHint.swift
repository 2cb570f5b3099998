import AsyncHTTPClient
import Atomics
import NIOCore

/// The event loop on which a connection of one `HTTPClient` last received bytes, for a call
/// to prefer.
///
/// AsyncHTTPClient runs the delegate of a request on an event loop it picks before it picks
/// the connection, by default the next loop of the group. When the connection is on another
/// loop, each callback becomes a job for the delegate's thread, often with a wake-up. The pool gives a request an idle connection on the loop it prefers when it has one. So a
/// call that prefers the loop a connection last read on finds its connection and its
/// delegate on one thread whenever calls follow one another. Under load every connection is
/// busy, and a call takes the first connection freed, wherever it is, as before.
///
/// The hint covers all the hosts of one client: calls alternating between hosts on
/// different loops gain nothing.
///
/// What it buys: 14% more sequential GETs per second (A/B of 2026-11-26, `Benchmarks/README.md`).
final class ConnectionLoopHint: Sendable {
    private let loops: [any EventLoop]
    /// The index in `loops` of the latest loop to read, or -1 before any connection has read.
    private let latest = ManagedAtomic(-1)
    /// Calls between ``begin()`` and ``end()``: every call through the transport, whichever
    /// API it takes, from its start until its head (or its whole buffered response) is in.
    private let inFlight = ManagedAtomic(0)

    init(group: any EventLoopGroup) {
        loops = Array(group.makeIterator())
    }

    /// The loop on which the delegate of a call starting now should run: the one a connection
    /// last read on, when no other call through this hint is under way and a connection has
    /// read; otherwise `nil`, for AsyncHTTPClient to pick. Pair each call with ``end()``, and
    /// begin every call, whether it will use the loop or not: a call that overlaps one not
    /// counted would be taken for a call alone.
    ///
    /// Only a call alone prefers a loop; calls that overlap keep AsyncHTTPClient's choice,
    /// since the pool opens new connections on the loop a request prefers, and one loop
    /// preferred by every call crowds them onto it.
    func begin() -> (any EventLoop)? {
        inFlight.loadThenWrappingIncrement(ordering: .relaxed) == 0 ? loop : nil
    }

    /// Ends a call that ``begin()`` started.
    func end() {
        inFlight.wrappingDecrement(ordering: .relaxed)
    }

    /// The loop a connection last read on, if any has.
    var loop: (any EventLoop)? {
        let index = latest.load(ordering: .relaxed)
        return index >= 0 ? loops[index] : nil
    }

    /// Puts first in a new connection's pipeline the handler that notes each read's loop.
    ///
    /// Meant for AsyncHTTPClient's connection initializers, which run once a connection is
    /// set up and before it carries a request.
    func watch(_ channel: any Channel) -> EventLoopFuture<Void> {
        guard let index = loops.firstIndex(where: { $0 === channel.eventLoop }) else {
            // A loop from another group: nothing to prefer.
            return channel.eventLoop.makeSucceededVoidFuture()
        }
        return channel.pipeline.addHandler(ReadWatcher(index: index, latest: latest), position: .first)
    }

    private final class ReadWatcher: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer

        let index: Int
        let latest: ManagedAtomic<Int>

        init(index: Int, latest: ManagedAtomic<Int>) {
            self.index = index
            self.latest = latest
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            // Every read of every connection passes here: writing only when the loop changes
            // leaves the shared value unwritten while calls keep to one loop.
            if latest.load(ordering: .relaxed) != index {
                latest.store(index, ordering: .relaxed)
            }
            context.fireChannelRead(data)
        }
    }
}
