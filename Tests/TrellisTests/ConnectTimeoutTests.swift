import Foundation
import Testing
import Trellis

#if canImport(Glibc)
import Glibc

/// A listening socket that never accepts, with its queue filled: further connection attempts
/// get no answer at all, as from a host that is down or behind a firewall that drops packets.
final class UnansweringListener {
    private var descriptors: [Int32] = []
    private(set) var port: UInt16 = 0

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        descriptors.append(listener)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(listener, raw, length) == 0, listen(listener, 0) == 0, getsockname(listener, raw, &length) == 0 else {
                    throw POSIXError(.EADDRINUSE)
                }
            }
        }
        port = UInt16(bigEndian: address.sin_port)
        // Fill the accept queue (a backlog of 0 holds one connection, and Linux lets one more
        // complete); the SYNs of later attempts are dropped.
        for _ in 0..<3 {
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            descriptors.append(filler)
            _ = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
    }

    deinit {
        for descriptor in descriptors { close(descriptor) }
    }
}

@Suite("Connect timeout")
struct ConnectTimeoutTests {
    @Test(.hangGuard)
    func anUnansweringHostFailsAtTheConnectTimeoutNotTheRequestTimeout() async throws {
        let listener = try UnansweringListener()
        let transport = AsyncHTTPClientTransport(connectTimeout: .milliseconds(300))
        defer { Task { try await transport.shutdown() } }
        let client = Client(baseURL: URL(string: "http://127.0.0.1:\(listener.port)")!, transport: transport) { $0.timeouts.request = .seconds(50) }
        let error = await #expect(throws: TrellisError.self) {
            try await client.perform(Request(method: .get, url: URL(string: "http://127.0.0.1:\(listener.port)/x")!))
        }
        guard case .connectionFailed(let failure) = error else {
            Issue.record("expected connectionFailed, got \(String(describing: error))")
            return
        }
        #expect(failure.reason == "no connection within the connect timeout")
        withExtendedLifetime(listener) {}
    }
}
#endif
