import Foundation
import Hummingbird
import NIOCore
import Testing
import Trellis

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
    @Test(.timeLimit(.minutes(1)))
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
            let slow = Task { try await client.data(for: try Trellis.Request(method: .get, url: url.appending(path: "slow"))) }
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
}
