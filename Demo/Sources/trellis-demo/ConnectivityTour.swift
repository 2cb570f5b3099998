// The connectivity part of the tour: a daemon's API on a Unix socket, a name override, and the
// proxy a client would choose for each destination from an environment like a CI runner's.
import Foundation
import Hummingbird
import Logging
import Trellis

struct ContainerSummary: Decodable, Sendable {
    // Docker's spelling.
    // swiftlint:disable:next identifier_name
    let Id: String
    let Names: [String]
}

/// A slice of Docker Engine's API, which listens on `/var/run/docker.sock`.
@Service
protocol DockerEngine {
    @GET("/_ping")
    func ping() async throws -> String

    @GET("/containers/json")
    func containers(all: Bool) async throws -> [ContainerSummary]
}

func connectivityTour(_ baseURL: URL) async throws {
    step("A service on a Unix socket: a stand-in for Docker's /var/run/docker.sock")
    let socket = FileManager.default.temporaryDirectory.appending(path: "trellis-demo-\(UUID().uuidString.prefix(8)).sock").path
    try await withDockerStandIn(at: socket) {
        let docker = DockerEngineService(baseURL: .unixSocket(socket))
        print("  GET /_ping → \(try await docker.ping())")
        for container in try await docker.containers(all: true) {
            print("  \(container.Id) \(container.Names.joined(separator: ", "))")
        }
    }

    step("A name override (curl's --resolve): blog.demo.test connects to 127.0.0.1, Host stays the name")
    let port = baseURL.port ?? 80
    let named = URL(string: "http://blog.demo.test:\(port)")!
    let overridden = BlogService(client: Client(baseURL: named) { $0.connectivity.nameOverrides = ["blog.demo.test": "127.0.0.1"] })
    print("  \(try await overridden.posts().count) posts from \(named.absoluteString)")

    step("Proxies from the environment, as curl reads them (read only when asked)")
    let environment = [
        "https_proxy": "http://ci:secret@proxy.corp.example:3128",
        "NO_PROXY": "localhost,.internal.example,10.0.0.0/8",
    ]
    let proxies = try Proxy.fromEnvironment(environment)
    for destination in ["https://api.github.com", "https://registry.internal.example", "http://10.1.2.3:8080", "http://localhost:3000"] {
        let url = URL(string: destination)!
        let proxy = proxies?.proxy(forScheme: url.scheme!, host: url.host!, port: url.port ?? (url.scheme == "https" ? 443 : 80))
        print("  \(destination) → \(proxy.map { "\($0)" } ?? "direct")")
    }
    do {
        _ = try Proxy.fromEnvironment(["https_proxy": "ftp://ci:secret@proxy"])
    } catch {
        print("  a bad value: \(error)")
    }
}

/// Runs `body` while a small server answers Docker's `/_ping` and `/containers/json` on `path`.
private func withDockerStandIn(at path: String, _ body: () async throws -> Void) async throws {
    let router = Router()
    router.get("_ping") { _, _ in "OK" }
    router.get("containers/json") { _, _ in
        Hummingbird.Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"[{"Id":"4f1c2a9e7b3d","Names":["/web"]},{"Id":"9a8b7c6d5e4f","Names":["/db"]}]"#))
        )
    }
    var logger = Logger(label: "demo-docker")
    // Stopping it at the end logs the cancellation of its listener as an error.
    logger.logLevel = .critical
    let (started, start) = AsyncStream.makeStream(of: Void.self)
    let app = Application(
        router: router,
        configuration: .init(address: .unixDomainSocket(path: path)),
        onServerRunning: { _ in start.yield() },
        logger: logger
    )
    let server = Task { try await app.run() }
    defer {
        server.cancel()
        try? FileManager.default.removeItem(atPath: path)
    }
    var iterator = started.makeAsyncIterator()
    _ = await iterator.next()
    try await body()
}
