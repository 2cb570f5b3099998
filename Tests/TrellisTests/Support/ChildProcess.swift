import Foundation
import NIOConcurrencyHelpers
import Subprocess
import SystemPackage

/// A program a test starts and that runs beside it until it ends or is killed: PostgreSQL,
/// a proxy, nginx, node, a fleet worker, a command run to its end.
///
/// Started through swift-subprocess, not Foundation's `Process`: on Linux, `Process.run()`
/// lists `/proc/self/fd` to close what the child should not inherit, and copies each entry's
/// whole 256-byte name field out of `readdir`'s buffer. Once the test process holds about
/// 1,360 descriptors, the last entry ends near the end of that buffer and the copy reads past
/// it; the parallel suite holds up to 1,900 (about 490 test servers at once), and crashed with
/// signal 11 in `Process.run()` on CI and here.
final class ChildProcess: Sendable {
    /// Where the program's standard output and standard error go.
    enum Output {
        case discarded
        /// Written to this file, which is created or emptied.
        case file(URL)
        /// Written to this descriptor, which is closed here once the program has it.
        case descriptor(FileDescriptor)
    }

    /// The program's process number, for signals (``send(_:)``, which stops sending once
    /// ``isRunning`` has turned `false`).
    let processIdentifier: pid_t
    private let exit: Task<TerminationStatus, any Error>
    private let ended: NIOLockedValueBox<Bool>

    /// Starts `executable` with `arguments` in `directory` (the test process's own if `nil`),
    /// with the test process's environment updated by `environment`, and returns once it runs.
    /// Its standard error goes where `output` says, or to the test process's own when
    /// `separateStandardError` is set.
    init(
        _ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:],
        output: Output = .discarded, separateStandardError: Bool = false
    ) async throws {
        var updated: [Environment.Key: String?] = [:]
        for (name, value) in environment {
            guard let key = Environment.Key(rawValue: name) else { throw Failure(description: "\(name) cannot name a variable") }
            updated[key] = value
        }
        let configuration = Configuration(
            executable: .path(FilePath(executable.path)), arguments: Arguments(arguments),
            environment: .inherit.updating(updated), workingDirectory: directory.map { FilePath($0.path) })
        let ended = NIOLockedValueBox(false)
        let (started, start) = AsyncStream.makeStream(of: pid_t.self)
        func run(_ output: some OutputProtocol) -> Task<TerminationStatus, any Error> {
            separateStandardError
                ? Self.run(configuration, output: output, error: .currentStandardError, started: start, ended: ended)
                : Self.run(configuration, output: output, error: .combinedWithOutput, started: start, ended: ended)
        }
        switch output {
        case .discarded:
            exit = run(.discarded)
        case .file(let file):
            let descriptor = try FileDescriptor.open(
                FilePath(file.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite, .groupRead, .otherRead])
            exit = run(.fileDescriptor(descriptor, closeAfterSpawningProcess: true))
        case .descriptor(let descriptor):
            exit = run(.fileDescriptor(descriptor, closeAfterSpawningProcess: true))
        }
        self.ended = ended
        var iterator = started.makeAsyncIterator()
        guard let processIdentifier = await iterator.next() else {
            // The stream ends without a number only when the program could not be started.
            _ = try await exit.value
            throw Failure(description: "\(executable.path) did not start")
        }
        self.processIdentifier = processIdentifier
    }

    /// Runs the program in a task of its own, which ends when the program has ended and been
    /// reaped; `started` gets its process number, or ends without one if it cannot start.
    private static func run(
        _ configuration: Configuration, output: some OutputProtocol, error: some ErrorOutputProtocol,
        started: AsyncStream<pid_t>.Continuation, ended: NIOLockedValueBox<Bool>
    ) -> Task<TerminationStatus, any Error> {
        Task {
            defer {
                ended.withLockedValue { $0 = true }
                started.finish()
            }
            let result = try await Subprocess.run(configuration, input: .none, output: output, error: error) { execution in
                started.yield(execution.processIdentifier.value)
                started.finish()
            }
            return result.terminationStatus
        }
    }

    /// Whether the program still runs.
    var isRunning: Bool { !ended.withLockedValue { $0 } }

    /// Waits for the program to end and returns how it ended.
    func terminationStatus() async throws -> TerminationStatus {
        try await exit.value
    }

    /// Sends `signal` to the program unless it has been seen to end. (It is reaped just
    /// before it is marked ended; Linux hands out process numbers in turn, so in that moment
    /// its number is not yet another program's.)
    func send(_ signal: Int32) {
        if isRunning { _ = kill(processIdentifier, signal) }
    }

    /// Runs `executable` with `arguments` in `directory` to its end, and throws, naming the
    /// command, if it does not exit with 0.
    static func runToEnd(_ executable: URL, _ arguments: [String], in directory: URL? = nil) async throws {
        let status = try await ChildProcess(executable, arguments, in: directory).terminationStatus()
        guard status.isSuccess else {
            throw Failure(description: "\(executable.lastPathComponent) \(arguments.joined(separator: " ")) ended: \(status)")
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }
}
