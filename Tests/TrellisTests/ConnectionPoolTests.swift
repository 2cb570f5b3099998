import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import Testing
@testable import Trellis

@Suite("Connection pool")
struct ConnectionPoolTests {
    /// AsyncHTTPClient fails a request that waited in its pool for a free connection longer
    /// than the connect timeout; a Trellis call waits for one until its own deadline.
    ///
    /// One connection to the host, held by a slow call, and two calls queued behind it (one
    /// without a body, one with: the transport sends them through different APIs). The slow
    /// call keeps the connection ten times as long as the pool lets a request wait: there is no
    /// signal for the pool's timer, and on a machine slow enough to delay the timer past the
    /// slow call the test passes without testing the wait, never fails.
    @Test(.hangGuard)
    func aCallQueuedForAConnectionWaitsUntilItsDeadlineNotTheConnectTimeout() async throws {
        let (arrivals, arrived) = AsyncStream.makeStream(of: Void.self)
        try await TestServer.with({ router in
            router.get("slow") { _, _ in
                arrived.yield()
                try await Task.sleep(for: .seconds(1))
                return "slow"
            }
            router.get("quick") { _, _ in "quick" }
            router.post("quick") { request, _ in
                let body = try await request.body.collect(upTo: 1024)
                return String(buffer: body)
            }
        }) { url in
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            configuration.timeout.connect = .milliseconds(100)
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 1
            let transport = AsyncHTTPClientTransport(configuration: configuration)
            let client = Client(baseURL: url, transport: transport) { $0.timeouts.request = .seconds(30) }
            // The one connection is opened first, as many times as it takes: on a machine slow
            // enough, connecting can take longer than the 100 ms this pool allows, and what
            // is tested is the wait for a connection, not the connecting.
            let quick = try Trellis.Request(method: .get, url: url.appending(path: "quick"))
            var opened = false
            for _ in 0..<50 where !opened {
                opened = (try? await client.data(for: quick)) != nil
            }
            try #require(opened)
            let slow = Task {
                defer { arrived.finish() }
                return try await client.data(for: try Trellis.Request(method: .get, url: url.appending(path: "slow")))
            }
            // The slow call holds the connection; if it fails first, the stream ends instead.
            var iterator = arrivals.makeAsyncIterator()
            await iterator.next()
            async let quickGet = client.data(for: try Trellis.Request(method: .get, url: url.appending(path: "quick")))
            var post = try Trellis.Request(method: .post, url: url.appending(path: "quick"))
            post.body = Trellis.RequestBody(Data("posted".utf8), contentType: "text/plain")
            async let quickPost = client.data(for: post)
            #expect(try await String(decoding: quickGet.body, as: UTF8.self) == "quick")
            #expect(try await String(decoding: quickPost.body, as: UTF8.self) == "posted")
            #expect(try await String(decoding: slow.value.body, as: UTF8.self) == "slow")
            try await transport.shutdown()
        }
    }

    /// A pool that gives up at once (a connect timeout of zero or near it) does not make the
    /// wait a busy loop: the request goes out again at most every 100 ms until the deadline.
    /// A slower machine only lowers the count.
    @Test(.hangGuard)
    func resendingAfterThePoolGaveUpPausesBetweenRounds() async throws {
        var rounds = 0
        let deadline = ContinuousClock.now + .milliseconds(350)
        // The loop every exchange of the transport runs, with a pool that always gives up.
        await #expect(throws: HTTPClientError.getConnectionFromPoolTimeout) {
            while true {
                let started = ContinuousClock.now
                rounds += 1
                try await AsyncHTTPClientTransport.waitForAConnection(
                    after: HTTPClientError.getConnectionFromPoolTimeout,
                    inRoundStartedAt: started,
                    until: deadline
                )
            }
        }
        #expect(rounds >= 1 && rounds <= 4, "\(rounds) rounds in 350 ms")
        #expect(ContinuousClock.now >= deadline)
    }

    /// A call through a transport that has been shut down fails at once with a connection
    /// failure; it does not wait for a response that cannot come.
    @Test(.hangGuard)
    func aCallAfterTheTransportShutDownFailsInsteadOfWaiting() async throws {
        try await TestServer.with({ router in router.get("quick") { _, _ in "quick" } }) { url in
            let transport = AsyncHTTPClientTransport()
            let client = Client(baseURL: url, transport: transport)
            let first = try await client.data(for: try Trellis.Request(method: .get, url: url.appending(path: "quick")))
            #expect(String(decoding: first.body, as: UTF8.self) == "quick")
            try await transport.shutdown()
            let error = await #expect(throws: TrellisError.self) {
                try await client.data(for: try Trellis.Request(method: .get, url: url.appending(path: "quick")))
            }
            guard case .connectionFailed = error else {
                Issue.record("expected connectionFailed, got \(String(describing: error))")
                return
            }
        }
    }

    /// A call cancelled while it waits in the pool for a connection ends with the cancellation.
    @Test(.hangGuard)
    func aCallCancelledWhileQueuedForAConnectionEnds() async throws {
        let (arrivals, arrived) = AsyncStream.makeStream(of: Void.self)
        let (releases, release) = AsyncStream.makeStream(of: Void.self)
        try await TestServer.with({ router in
            router.get("held") { _, _ in
                arrived.yield()
                for await _ in releases { break }
                return "held"
            }
            router.get("quick") { _, _ in "quick" }
        }) { url in
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 1
            let transport = AsyncHTTPClientTransport(configuration: configuration)
            let client = Client(baseURL: url, transport: transport)
            let held = Task { try await client.data(for: try Trellis.Request(method: .get, url: url.appending(path: "held"))) }
            var iterator = arrivals.makeAsyncIterator()
            await iterator.next()
            let queued = Task { try await client.data(for: try Trellis.Request(method: .get, url: url.appending(path: "quick"))) }
            queued.cancel()
            await #expect(throws: CancellationError.self) { try await queued.value }
            release.yield()
            #expect(try await String(decoding: held.value.body, as: UTF8.self) == "held")
            try await transport.shutdown()
        }
    }
}
