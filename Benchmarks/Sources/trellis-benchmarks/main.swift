// `swift run -c release trellis-benchmarks [suite…]`, from `Benchmarks/`: measures Trellis against baselines
// taken in the same run, against an in-process server, and prints a table per suite.
// Suites: calls (AsyncHTTPClient), urlsession, openapi (a generated client), auth,
// (and, when named: cache, bomb, allocations, observation, pipeline, proxy, jsonlines, resilience, fleet, outbox, outbox-fleet), transfers, realtime, compile. With no argument,
// every suite runs. Run it from `Benchmarks/` (compile builds targets of that package).
import Foundation

let suites = ["calls", "urlsession", "openapi", "auth", "transfers", "realtime", "compile"]
// A transfer case run in a child process by the transfers suite, so its peak memory is its own.
if CommandLine.arguments.dropFirst().first == "transfer-child" {
    do {
        try await TransferBenchmark.runChild(Array(CommandLine.arguments.dropFirst(2)))
        exit(0)
    } catch {
        print("transfer failed: \(error)")
        exit(1)
    }
}

// A drainer of the outbox-fleet suite, in a process of its own.
if CommandLine.arguments.dropFirst().first == "outbox-drain", let url = CommandLine.arguments.dropFirst(2).first.flatMap(URL.init(string:)) {
    do {
        try await OutboxFleetBenchmark.drain(url)
        exit(0)
    } catch {
        print("outbox-drain failed: \(error)")
        exit(1)
    }
}

// The server of the calls, urlsession and openapi suites, in a process of its own (see `withServer`).
if CommandLine.arguments.dropFirst().first == "serve", let suite = CommandLine.arguments.dropFirst(2).first {
    do {
        try await serve(suite)
        exit(0)
    } catch {
        print("serve failed: \(error)")
        exit(1)
    }
}

let requested = CommandLine.arguments.dropFirst().isEmpty ? suites : Array(CommandLine.arguments.dropFirst())
let rounds = Int(ProcessInfo.processInfo.environment["TRELLIS_BENCH_ROUNDS"] ?? "") ?? 7

#if DEBUG
print("warning: a debug build; run with `swift run -c release trellis-benchmarks` for figures worth reporting")
#endif
print("Trellis benchmarks: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(rounds) rounds, median of each")

do {
    for suite in requested {
        switch suite {
        case "calls":
            CallBenchmark.print("Service calls vs raw AsyncHTTPClient + JSONDecoder", try await CallBenchmark.run(transport: "ahc", rounds: rounds))
        case "urlsession":
            CallBenchmark.print("Service calls vs raw URLSession + JSONDecoder", try await CallBenchmark.run(transport: "urlsession", rounds: rounds))
        case "openapi":
            CallBenchmark.print(
                "A generated OpenAPI client over TrellisOpenAPI (\"Trellis\") vs over swift-openapi-async-http-client (\"raw\")",
                try await OpenAPIBenchmark.run(rounds: rounds)
            )
        case "auth":
            Report.print("Token refresh: \(TokenRefreshBenchmark.calls) concurrent calls (AsyncHTTPClient)", try await TokenRefreshBenchmark.run(rounds: rounds))
        case "transfers":
            Report.print(
                "Transfers: \(TransferBenchmark.size >> 20) MiB to and from disk (AsyncHTTPClient), each case in its own process",
                try await TransferBenchmark.run(rounds: min(rounds, 3))
            )
        case "realtime":
            Report.print(
                "Slow readers: a server pushing \(RealtimeBenchmark.offeredMiB) MiB as fast as it can to a reader taking 1 ms per message",
                try await RealtimeBenchmark.run(rounds: min(rounds, 3))
            )
        case "jsonlines":
            Report.print("A JSON Lines stream read as values (AsyncHTTPClient)", try await JSONLinesBenchmark.run(rounds: min(rounds, 5)))
        case "resilience":
            Report.print("Resilience: hedging against a slow tail, and an open circuit's refusals (AsyncHTTPClient)", try await ResilienceBenchmark.run(rounds: min(rounds, 5)))
        case "proxy":
            CallBenchmark.print("Service calls through a local tinyproxy and squid vs raw AsyncHTTPClient with the same proxy", try await ProxyBenchmark.run(rounds: rounds))
        case "cache":
            CallBenchmark.print("A cache hit (\"Trellis\") vs the same call over the network (\"raw\", CachePolicy.reload), one client", try await CacheBenchmark.run(rounds: rounds))
        case "bomb":
            Report.print(
                "A compression bomb: gzip that inflates to \(BombBenchmark.inflatedMiB) MiB (AsyncHTTPClient)",
                try await BombBenchmark.run()
            )
        case "allocations":
            try await AllocationBreakdown.run()
        case "observation":
            print(ObservationCheckBenchmark.run())
        case "pipeline":
            let lines = try await PipelineBenchmark.run(rounds: rounds)
            if !lines.isEmpty {
                print("\nThe client and its pipeline alone: \(PipelineBenchmark.calls) GETs of the 199-byte article, and as many POSTs, over a transport that answers at once")
                Report.table(["", "per call"], lines)
            }
        case "fleet":
            Report.print(
                "A fleet's shared state through PostgreSQL against the same state in the process (AsyncHTTPClient)",
                try await FleetBenchmark.run(rounds: max(rounds, 5))
            )
        case "outbox":
            Report.print(
                "The outbox on SQLite: \(OutboxBenchmark.calls) calls of a 200-byte JSON body (AsyncHTTPClient)",
                try await OutboxBenchmark.run(rounds: max(rounds, 5))
            )
        case "outbox-fleet":
            Report.print(
                "A PostgreSQL outbox drained by a fleet: four processes against one",
                try await OutboxFleetBenchmark.run(rounds: min(rounds, 5))
            )
        case "compile":
            let directory = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
            Report.print(
                "Compile cost: \(CompileCostBenchmark.endpointPairs * 2) endpoints (swift build -c release --target)",
                try CompileCostBenchmark.run(rounds: rounds, packageDirectory: directory)
            )
        default:
            print("unknown suite \(suite); known: \(suites.joined(separator: ", "))")
            exit(2)
        }
    }
} catch {
    print("benchmark failed: \(error)")
    exit(1)
}
