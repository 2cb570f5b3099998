#if Postgres
import Foundation
import PostgresNIO

/// A PostgreSQL server of the test's own: a cluster made with `initdb` in a temporary folder and
/// started on a free port of 127.0.0.1, as the `postgres` user when the tests run as root
/// (PostgreSQL refuses to run as root). `Scripts/test` installs PostgreSQL when it is missing.
/// Trust authentication, for the user `trellis`, on the loopback only.
final class PostgresServer: Sendable {
    let port: Int
    let folder: URL
    private let binaries: URL

    /// Starts a server; throws, naming what is missing, when PostgreSQL is not installed.
    init() async throws {
        binaries = try Self.findBinaries()
        // As root, in /tmp itself: the `postgres` user must reach the folder, and a TMPDIR of
        // root's own (CI's is made by mktemp, mode 0700) is closed to it.
        let temporary = getuid() == 0 ? URL(filePath: "/tmp") : FileManager.default.temporaryDirectory
        folder = temporary.appending(path: "trellis-postgres-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        port = try await TestProgram.freePort()
        if getuid() == 0 { try await Self.run(URL(filePath: "/bin/chown"), ["postgres", folder.path]) }
        try await run("initdb", "-D", folder.appending(path: "data").path, "-A", "trust", "-U", "trellis", "--no-sync")
        try await start()
    }

    /// Runs `body` with a fresh server and a running client of it (as the user `trellis`, on
    /// the database `postgres`), then removes the server.
    static func withDatabase(_ body: (PostgresServer, PostgresClient) async throws -> Void) async throws {
        let server = try await PostgresServer()
        let postgres = PostgresClient(configuration: server.configuration)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await postgres.run() }
                defer { group.cancelAll() }
                try await body(server, postgres)
            }
        } catch {
            await server.remove()
            throw error
        }
        await server.remove()
    }

    /// How a client reaches the server.
    var configuration: PostgresClient.Configuration {
        PostgresClient.Configuration(host: "127.0.0.1", port: port, username: "trellis", password: nil, database: "postgres", tls: .disable)
    }

    /// Starts the server again on its port, after ``stop()``, and returns once it accepts
    /// connections. The server runs as a child of the tests, not through `pg_ctl start`: a
    /// daemon keeps the descriptor Foundation watches for its parent's exit, so `pg_ctl`'s end
    /// was never seen.
    func start() async throws {
        let data = folder.appending(path: "data").path
        let serverArguments = ["-D", data, "-p", "\(port)", "-k", folder.path, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
        let process = Process()
        if getuid() == 0 {
            process.executableURL = URL(filePath: "/usr/sbin/runuser")
            process.arguments = ["-u", "postgres", "--", binaries.appending(path: "postgres").path] + serverArguments
        } else {
            process.executableURL = binaries.appending(path: "postgres")
            process.arguments = serverArguments
        }
        let log = FileManager.default.createFile(atPath: folder.appending(path: "log").path, contents: nil)
        _ = log
        let handle = try FileHandle(forWritingTo: folder.appending(path: "log"))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        for _ in 0..<500 {
            if (try? await Self.run(binaries.appending(path: "pg_isready"), ["-h", "127.0.0.1", "-p", "\(port)", "-q"])) != nil { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Failure(description: "PostgreSQL did not accept connections on \(port) within 10 s")
    }

    /// Stops the server at once, as a crash would, dropping its sessions: SIGQUIT to the
    /// postmaster, whose process number its `postmaster.pid` gives.
    func stop() async throws {
        let pidFile = folder.appending(path: "data/postmaster.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8), let line = text.split(separator: "\n").first,
            let pid = Int32(line)
        else { return }
        kill(pid, SIGQUIT)
        for _ in 0..<500 where kill(pid, 0) == 0 { try await Task.sleep(for: .milliseconds(20)) }
    }

    /// Stops the server and removes its folder.
    func remove() async {
        try? await stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Runs one of PostgreSQL's programs, as the `postgres` user when this is root.
    private func run(_ program: String, _ arguments: String...) async throws {
        let path = binaries.appending(path: program).path
        if getuid() == 0 {
            try await Self.run(URL(filePath: "/usr/sbin/runuser"), ["-u", "postgres", "--", path] + arguments)
        } else {
            try await Self.run(URL(filePath: path), arguments)
        }
    }

    /// Runs `executable` to its end. (`Process.waitUntilExit()` needs a run loop, which a
    /// test's task does not have on Linux: the exit is awaited through the termination handler.)
    private static func run(_ executable: URL, _ arguments: [String]) async throws {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        let (exited, exit) = AsyncStream.makeStream(of: Void.self)
        process.terminationHandler = { _ in exit.finish() }
        try process.run()
        for await _ in exited {}
        guard process.terminationStatus == 0 else {
            throw Failure(description: "\(executable.lastPathComponent) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
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
