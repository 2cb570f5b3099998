import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOPosix

/// One row of the report: a measured case next to its baseline from the same run.
struct Row {
    var name: String
    var baseline: String
    var baselineValue: Double
    var value: Double
    var unit: String
    var note: String = ""

    /// Measured over baseline: above 1 is slower when the unit is time.
    var ratio: Double { value / baselineValue }
}

enum Report {
    static func print(_ title: String, _ rows: [Row]) {
        Swift.print("\n\(title)")
        let header = ["case", "baseline", "baseline value", "value", "ratio", "note"]
        let lines = rows.map { row in
            [
                row.name, row.baseline, format(row.baselineValue, row.unit), format(row.value, row.unit),
                String(format: "%.2fx", row.ratio), row.note,
            ]
        }
        table(header, lines)
    }

    /// A Markdown table with padded columns, readable in a terminal and pasteable in a README.
    static func table(_ header: [String], _ lines: [[String]]) {
        let widths = header.indices.map { column in ([header] + lines).map { $0[column].count }.max() ?? 0 }
        func render(_ cells: [String]) -> String {
            "| " + cells.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: " | ") + " |"
        }
        Swift.print(render(header))
        Swift.print("|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|")
        for line in lines { Swift.print(render(line)) }
    }

    static func format(_ value: Double, _ unit: String) -> String {
        switch unit {
        case "ms": String(format: "%.1f ms", value)
        case "µs": String(format: "%.2f µs", value)
        default: String(format: "%.0f \(unit)", value)
        }
    }
}

/// The servers of the call suites, which run in a process of their own.
enum ServedRoutes: String {
    case calls, openapi

    var install: (Router<BasicRequestContext>) -> Void {
        switch self {
        case .calls: ArticleFixtures.install
        case .openapi: OpenAPIBenchmark.installServer
        }
    }
}

/// Runs `body` against the server of `routes`, in a child process
/// (`trellis-benchmarks serve <routes>`), as a server elsewhere would be: it shares neither
/// the event loops nor the task threads of the clients it answers, and the process's CPU time
/// and allocations are the clients' alone. Sharing the loops made raw AsyncHTTPClient faster
/// whenever a connection's two ends landed on one thread, which no real server does
/// (Benchmarks/README.md). `TRELLIS_BENCH_SERVER=inprocess`, and the knobs that need the
/// server at hand (`TRELLIS_BENCH_SERVER_LOOPS`, `TRELLIS_BENCH_PAIRING`), keep it in this
/// process.
func withServer<Result>(_ routes: ServedRoutes, _ body: (URL) async throws -> Result) async throws -> Result {
    let environment = ProcessInfo.processInfo.environment
    let inProcess = environment["TRELLIS_BENCH_SERVER"] == "inprocess" || environment["TRELLIS_BENCH_SERVER_LOOPS"] != nil
        || LoopPairing.shared != nil
    return inProcess ? try await withServer(routes.install, body) : try await withServerProcess(routes, body)
}

/// Runs `body` against a Hummingbird server on 127.0.0.1, in this process.
func withServer<Result>(
    _ configure: (Router<BasicRequestContext>) -> Void,
    webSocket: Router<BasicWebSocketRequestContext>? = nil,
    _ body: (URL) async throws -> Result
) async throws -> Result {
    let router = Router()
    configure(router)
    // `TRELLIS_BENCH_SERVER_LOOPS=<n>`: the server on event loops of its own rather than on the
    // process's shared ones, which the clients use too (a server elsewhere shares none of them).
    let serverLoops = ProcessInfo.processInfo.environment["TRELLIS_BENCH_SERVER_LOOPS"].flatMap { Int($0) }
    let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
    var logger = Logger(label: "benchmark-server")
    logger.logLevel = .critical
    let app = Application(
        router: router,
        server: webSocket.map { .http1WebSocketUpgrade(webSocketRouter: $0) }
            ?? .http1(configuration: .init(additionalChannelHandlers: LoopPairing.shared.map { [$0.serverHandler()] } ?? [])),
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in portSink.yield(channel.localAddress?.port ?? 0) },
        eventLoopGroupProvider: serverLoops.map { .shared(MultiThreadedEventLoopGroup(numberOfThreads: $0)) } ?? .singleton,
        logger: logger
    )
    let server = Task { try await app.run() }
    defer { server.cancel() }
    var iterator = ports.makeAsyncIterator()
    guard let port = await iterator.next() else { throw CancellationError() }
    return try await body(URL(string: "http://127.0.0.1:\(port)")!)
}

/// `body` against `trellis-benchmarks serve <routes>` in a child process, which ends when its
/// standard input closes.
private func withServerProcess<Result>(_ routes: ServedRoutes, _ body: (URL) async throws -> Result) async throws -> Result {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
    process.arguments = ["serve", routes.rawValue]
    let output = Pipe()
    let input = Pipe()
    process.standardOutput = output
    process.standardInput = input
    try process.run()
    defer {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
    var line = Data()
    while let byte = try output.fileHandleForReading.read(upToCount: 1), let first = byte.first, first != UInt8(ascii: "\n") {
        line.append(first)
    }
    let text = String(decoding: line, as: UTF8.self)
    guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else {
        throw BenchmarkFailure(description: "the server process printed \(text)")
    }
    return try await body(URL(string: "http://127.0.0.1:\(port)")!)
}

/// Serves the routes named `name` (`calls` or `openapi`) in this process and prints
/// `PORT <n>`, until standard input closes: the server process of `withServer(_:_:)`.
func serve(_ name: String) async throws {
    guard let routes = ServedRoutes(rawValue: name) else {
        throw BenchmarkFailure(description: "no server to serve for \(name)")
    }
    // A thread of its own waits for the end of standard input: a task blocked on it would
    // hold one of the two threads that run the server's handlers.
    Thread {
        _ = FileHandle.standardInput.readDataToEndOfFile()
        exit(0)
    }.start()
    try await withServer(routes.install) { url in
        FileHandle.standardOutput.write(Data("PORT \(url.port ?? 0)\n".utf8))
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}

/// The wall time of `body` in milliseconds.
func milliseconds(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    var description: String
}

/// `rounds` figures of each side, the sides taking turns and the first swapped each round.
func alternated(
    _ rounds: Int,
    _ baseline: () async throws -> Double,
    _ measured: () async throws -> Double
) async throws -> (baseline: [Double], measured: [Double]) {
    var figures: (baseline: [Double], measured: [Double]) = ([], [])
    for round in 0..<rounds {
        if round.isMultiple(of: 2) {
            figures.baseline.append(try await baseline())
            figures.measured.append(try await measured())
        } else {
            figures.measured.append(try await measured())
            figures.baseline.append(try await baseline())
        }
    }
    return figures
}

func mean(_ values: [Double]) -> Double { values.reduce(0, +) / Double(max(values.count, 1)) }

/// A field of `/proc/self/status` in KiB: `VmRSS:` (resident now) or `VmHWM:` (its peak).
func residentKiB(_ field: String) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) })
    else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}
