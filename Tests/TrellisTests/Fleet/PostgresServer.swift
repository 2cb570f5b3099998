#if Postgres
import Foundation
import PostgresNIO

/// A PostgreSQL server of the test's own: a cluster in a temporary folder, started as the
/// `postgres` user when the tests run as root (PostgreSQL refuses to run as root), and reached
/// through a Unix socket in that folder alone: a free TCP port found beforehand was sometimes
/// taken by another test's server before PostgreSQL bound it. `Scripts/test` installs
/// PostgreSQL when it is missing. Trust authentication, for the user `trellis`.
final class PostgresServer: Sendable {
    let folder: URL
    /// The server's socket, which clients connect to.
    var socket: String { folder.appending(path: ".s.PGSQL.5432").path }
    private let binaries: URL
    /// The cluster `initdb` made once for the test process, which each server copies: a dozen
    /// `initdb` at once, with the rest of the suite, kept two cores busy for half a minute.
    private static let template = Task { try await makeTemplate() }

    /// Starts a server; throws, naming what is missing, when PostgreSQL is not installed.
    init() async throws {
        binaries = try Self.findBinaries()
        // As root, in /tmp itself: the `postgres` user must reach the folder, and a TMPDIR of
        // root's own (CI's is made by mktemp, mode 0700) is closed to it.
        let temporary = getuid() == 0 ? URL(filePath: "/tmp") : FileManager.default.temporaryDirectory
        folder = temporary.appending(path: "trellis-postgres-\(UUID().uuidString)")
        let template = try await Self.template.value
        try await Self.makeFolder(folder)
        try await Self.run(Self.asOwner(URL(filePath: "/bin/cp"), ["-a", template.appending(path: "data").path, folder.path]))
        try await start()
    }

    /// A folder the server's user owns.
    private static func makeFolder(_ folder: URL) async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        if getuid() == 0 { try await ChildProcess.runToEnd(URL(filePath: "/bin/chown"), ["postgres", folder.path]) }
    }

    /// The cluster every server copies: one per PostgreSQL version in the temporary folder,
    /// made by the first test run that needs it and kept for the next ones (a few megabytes).
    /// Made under a name of its own and renamed into place, so that two test processes at once
    /// never copy a cluster half made.
    private static func makeTemplate() async throws -> URL {
        let temporary = getuid() == 0 ? URL(filePath: "/tmp") : FileManager.default.temporaryDirectory
        let binaries = try findBinaries()
        let template = temporary.appending(path: "trellis-postgres-template-\(binaries.deletingLastPathComponent().lastPathComponent)")
        if FileManager.default.fileExists(atPath: template.appending(path: "data/PG_VERSION").path) { return template }
        let folder = temporary.appending(path: "trellis-postgres-\(UUID().uuidString)")
        try await makeFolder(folder)
        let initdb = binaries.appending(path: "initdb")
        try await run(asOwner(initdb, ["-D", folder.appending(path: "data").path, "-A", "trust", "-U", "trellis", "--no-sync"]))
        if rename(folder.path, template.path) != 0 {
            // Another test process put its template in place first.
            try? FileManager.default.removeItem(at: folder)
        }
        return template
    }

    /// `executable` with `arguments`, as the `postgres` user when this is root.
    private static func asOwner(_ executable: URL, _ arguments: [String]) -> (URL, [String]) {
        guard getuid() == 0 else { return (executable, arguments) }
        return (URL(filePath: "/usr/sbin/runuser"), ["-u", "postgres", "--", executable.path] + arguments)
    }

    private static func run(_ command: (URL, [String])) async throws {
        try await ChildProcess.runToEnd(command.0, command.1)
    }

    /// Runs `body` with a fresh server and a running client of it (as the user `trellis`, on
    /// the database `postgres`), then removes the server.
    static func withDatabase(_ body: (PostgresServer, PostgresClient) async throws -> Void) async throws {
        let server = try await PostgresServer()
        do {
            try await running(PostgresClient(configuration: server.configuration)) { try await body(server, $0) }
        } catch {
            await server.remove()
            throw error
        }
        await server.remove()
    }

    /// How a client reaches the server.
    var configuration: PostgresClient.Configuration { Self.configuration(socket: socket) }

    /// How a test's client reaches a server on `socket`, with keep-alive off: in postgres-nio
    /// 1.33.2 a keep-alive that starts as the pool closes its connection for idleness (at 60 s,
    /// the second 30 s keep-alive) is written to the closed channel and never answered, and
    /// `run()` waits for it for ever, cancelled or not. Under load that held a test's end three
    /// times (its pool's trace showed the keep-alive's query never reaching the connection).
    static func configuration(socket: String) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(unixSocketPath: socket, username: "trellis", password: nil, database: "postgres")
        configuration.options.keepAliveBehavior = nil
        return configuration
    }

    /// Runs `body` with `postgres` running beside it, and stops it afterwards.
    static func running(_ postgres: PostgresClient, _ body: (PostgresClient) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await postgres.run() }
            defer { group.cancelAll() }
            try await body(postgres)
        }
    }

    /// Starts the server again on its socket, after ``stop()``, and returns once it accepts
    /// connections. The server runs as a child of the tests, not as `pg_ctl start`'s daemon,
    /// so that a server that fails to start is seen to end.
    func start() async throws {
        let data = folder.appending(path: "data").path
        let serverArguments = ["-D", data, "-p", "5432", "-k", folder.path, "-c", "listen_addresses=", "-c", "fsync=off"]
        let (executable, arguments) = Self.asOwner(binaries.appending(path: "postgres"), serverArguments)
        let process = try await ChildProcess(executable, arguments, output: .file(folder.appending(path: "log")))
        // As long as the server runs, however slowly a loaded machine starts it (the suite's
        // hang guard bounds a server that never answers). pg_isready is the only signal.
        while process.isRunning {
            if (try? await ChildProcess.runToEnd(binaries.appending(path: "pg_isready"), ["-h", folder.path, "-p", "5432", "-q"])) != nil { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        let log = (try? String(contentsOf: folder.appending(path: "log"), encoding: .utf8)) ?? ""
        throw Failure(description: "PostgreSQL in \(folder.path) ended before it accepted connections: \(log)")
    }

    /// Stops the server at once, as a crash would, dropping its sessions: SIGQUIT to the
    /// postmaster, whose process number its `postmaster.pid` gives.
    func stop() async throws {
        let pidFile = folder.appending(path: "data/postmaster.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8), let line = text.split(separator: "\n").first,
            let pid = Int32(line)
        else { return }
        kill(pid, SIGQUIT)
        while kill(pid, 0) == 0 { try await Task.sleep(for: .milliseconds(20)) }
    }

    /// Stops the server and removes its folder.
    func remove() async {
        try? await stop()
        try? FileManager.default.removeItem(at: folder)
    }

    private static func findBinaries() throws -> URL {
        let root = URL(filePath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        for version in versions.sorted(by: >) where FileManager.default.fileExists(atPath: root.appending(path: "\(version)/bin/initdb").path) {
            return root.appending(path: "\(version)/bin")
        }
        throw Failure(description: "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); Scripts/test installs it")
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }
}
#endif
