import Foundation
import NIOCore
import NIOPosix

/// An independent program a test starts (tinyproxy, microsocks, nginx) on a free port of
/// 127.0.0.1, and stops when it ends. CI installs them (`.ci/run`).
final class TestProgram: StoppableTestServer {
    let port: Int
    private let process: ChildProcess
    private let directory: URL

    /// Starts `executable` with the arguments `arguments(port, directory)` gives, in a
    /// temporary directory of its own, and returns once it listens on the port.
    ///
    /// The port is one the system had free a moment before, and a server of another test may
    /// take it first: then the program cannot listen and exits, and it is started again on
    /// another port. (A connection to the port succeeding would not tell: it may be that other
    /// server's; so the program's own listening socket is looked for.)
    init(_ executable: String, arguments: (Int, URL) throws -> [String]) async throws {
        guard let path = ["/usr/bin", "/usr/sbin", "/usr/local/bin"].map({ "\($0)/\(executable)" })
            .first(where: FileManager.default.isExecutableFile(atPath:))
        else {
            throw ProgramMissing(name: executable)
        }
        directory = FileManager.default.temporaryDirectory.appending(path: "trellis-\(executable)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var attempt = 0
        while true {
            attempt += 1
            let port = try await Self.freePort()
            let process = try await ChildProcess(
                URL(fileURLWithPath: path), try arguments(port, directory), output: .file(directory.appending(path: "output.log")))
            if try await Self.waitUntilListening(port: port, process: process) {
                self.port = port
                self.process = process
                return
            }
            guard attempt < 5 else { throw ProgramMissing(name: "\(executable) (exited at start five times)") }
        }
    }

    /// What the program has logged: its output, and the log file it was told to write
    /// (tinyproxy logs each request line; microsocks each connection it opens).
    var log: String {
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        return files.filter { $0.pathExtension == "log" }.compactMap { try? String(contentsOf: $0, encoding: .utf8) }.joined()
    }

    func stop() async throws {
        // SIGKILL: nothing the program would do on SIGTERM is needed, and it ends at once.
        process.send(SIGKILL)
        _ = try? await process.terminationStatus()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A port nothing listens on now: one the system picked for a listener just closed.
    static func freePort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress!.port!
        try await channel.close()
        return port
    }

    /// Whether `process` came to listen on `port`: `true` once it does, `false` if it exits
    /// first.
    private static func waitUntilListening(port: Int, process: ChildProcess) async throws -> Bool {
        while process.isRunning {
            #if os(Linux)
            if listens(process.processIdentifier, on: port) { return true }
            #else
            if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get() {
                try? await channel.close()
                return true
            }
            #endif
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    #if os(Linux)
    /// Whether the process `pid` holds a socket listening on `port`: one of its descriptors is
    /// a socket whose inode `/proc/net/tcp` lists in the LISTEN state on that port. (Elsewhere
    /// a connection to the port succeeding is taken for it.)
    private static func listens(_ pid: Int32, on port: Int) -> Bool {
        let hexPort = String(format: ":%04X", port)
        var inodes = Set<String>()
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                // sl, local_address, rem_address, st, …, inode (the tenth field)
                guard fields.count > 9, fields[1].hasSuffix(hexPort), fields[3] == "0A" else { continue }
                inodes.insert(String(fields[9]))
            }
        }
        guard !inodes.isEmpty else { return false }
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return descriptors.contains { descriptor in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(descriptor)") else { return false }
            return target.hasPrefix("socket:[") && inodes.contains(String(target.dropFirst(8).dropLast()))
        }
    }
    #endif

    struct ProgramMissing: Error, CustomStringConvertible {
        let name: String
        var description: String { "the test needs \(name): apt-get install tinyproxy microsocks nginx-light (Scripts/test installs them)" }
    }

    /// tinyproxy on a free port, allowing 127.0.0.1, with `extra` configuration lines.
    static func tinyproxy(_ extra: [String] = []) async throws -> TestProgram {
        try await TestProgram("tinyproxy") { port, directory in
            let configuration = directory.appending(path: "tinyproxy.conf")
            let lines = ["Port \(port)", "Listen 127.0.0.1", "Timeout 30", "Allow 127.0.0.1", "LogLevel Connect",
                         "LogFile \"\(directory.path)/tinyproxy.log\"", "PidFile \"\(directory.path)/tinyproxy.pid\"",
                         "MaxClients 20"] + extra
            try lines.joined(separator: "\n").write(to: configuration, atomically: true, encoding: .utf8)
            return ["-d", "-c", configuration.path]
        }
    }

    /// nginx serving HTTPS on a free port of 127.0.0.1 as `localhost` with `certificates`'
    /// leaf, asking every client for a certificate their authority signed (`ssl_verify_client
    /// on`), and answering `/` with the subject of the certificate it got.
    static func nginx(requiringClientsOf certificates: TestCertificates) async throws -> TestProgram {
        let pem = try certificates.pem()
        return try await nginx { port, directory in
            let path = directory.path
            try pem.authority.write(to: directory.appending(path: "authority.pem"), atomically: true, encoding: .utf8)
            try pem.leaf.write(to: directory.appending(path: "leaf.pem"), atomically: true, encoding: .utf8)
            try pem.leafKey.write(to: directory.appending(path: "leaf-key.pem"), atomically: true, encoding: .utf8)
            return """
                listen 127.0.0.1:\(port) ssl;
                server_name localhost;
                ssl_certificate \(path)/leaf.pem;
                ssl_certificate_key \(path)/leaf-key.pem;
                ssl_client_certificate \(path)/authority.pem;
                ssl_verify_client on;
                location / { return 200 "$ssl_client_s_dn"; }
                """
        }
    }

    /// nginx serving plain HTTP on the Unix domain socket ``unixSocketPath`` (and on a free
    /// port, which tells when it is ready), answering every request with the `Host` it got;
    /// nginx answers 400 to an HTTP/1.1 request without one.
    static func nginxOnUnixSocket() async throws -> TestProgram {
        try await nginx(onUnixSocket: true) { port, directory in
            """
            listen 127.0.0.1:\(port);
            listen unix:\(directory.path)/nginx.sock;
            location / { return 200 "host=$http_host"; }
            """
        }
    }

    /// nginx serving HTTPS on the Unix domain socket ``unixSocketPath`` with the leaf of
    /// `certificates` (and plain HTTP on a free port, which tells when it is ready), answering
    /// every request with the TLS server name the client sent, if any.
    static func nginxOnUnixSocketOverTLS(_ certificates: TestCertificates) async throws -> TestProgram {
        let pem = try certificates.pem()
        return try await nginx(onUnixSocket: true) { port, directory in
            let path = directory.path
            try pem.leaf.write(to: directory.appending(path: "leaf.pem"), atomically: true, encoding: .utf8)
            try pem.leafKey.write(to: directory.appending(path: "leaf-key.pem"), atomically: true, encoding: .utf8)
            return """
                listen 127.0.0.1:\(port);
                listen unix:\(path)/nginx.sock ssl;
                ssl_certificate \(path)/leaf.pem;
                ssl_certificate_key \(path)/leaf-key.pem;
                location / { return 200 "sni=$ssl_server_name"; }
                """
        }
    }

    /// nginx in the foreground, as one process, keeping every file in its directory, with one
    /// `server` block whose lines `server(port, directory)` gives.
    private static func nginx(onUnixSocket: Bool = false, server: (Int, URL) throws -> String) async throws -> TestProgram {
        let program = try await TestProgram("nginx") { port, directory in
            let path = directory.path
            let configuration = """
                daemon off;
                master_process off;
                pid \(path)/nginx.pid;
                error_log \(path)/error.log;
                events { worker_connections 64; }
                http {
                    access_log \(path)/access.log;
                    client_body_temp_path \(path)/body;
                    proxy_temp_path \(path)/proxy;
                    fastcgi_temp_path \(path)/fastcgi;
                    uwsgi_temp_path \(path)/uwsgi;
                    scgi_temp_path \(path)/scgi;
                    server {
                \(try server(port, directory))
                    }
                }
                """
            try configuration.write(to: directory.appending(path: "nginx.conf"), atomically: true, encoding: .utf8)
            return ["-p", path, "-e", "\(path)/error.log", "-c", "\(path)/nginx.conf"]
        }
        if onUnixSocket { try await program.waitUntilTheUnixSocketAccepts() }
        return program
    }

    private struct UnixSocketNeverAccepted: Error, CustomStringConvertible {
        let path: String
        var description: String { "nginx did not accept a connection on \(path) within 10 s" }
    }

    /// Returns once ``unixSocketPath`` takes a connection: nginx may listen on its port a
    /// moment before it has bound the socket, and a loaded machine stretched that moment into
    /// a test's "connection refused".
    private func waitUntilTheUnixSocketAccepts() async throws {
        for _ in 0..<500 {
            if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(unixDomainSocketPath: unixSocketPath).get()
            {
                try? await channel.close()
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw UnixSocketNeverAccepted(path: unixSocketPath)
    }

    /// The socket ``nginxOnUnixSocket()`` listens on.
    var unixSocketPath: String { directory.appending(path: "nginx.sock").path }

    /// microsocks, a SOCKS5 proxy, on a free port of 127.0.0.1.
    static func microsocks() async throws -> TestProgram {
        try await TestProgram("microsocks") { port, _ in ["-i", "127.0.0.1", "-p", "\(port)"] }
    }
}
