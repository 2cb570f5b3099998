// `swift run -c release trellis-benchmarks [suite…]`: measures Trellis against baselines
// taken in the same run, against an in-process server, and prints a table per suite.
// Suites: calls (AsyncHTTPClient), urlsession, auth. With no argument, every suite runs.
import Foundation

let suites = ["calls", "urlsession", "auth"]
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
        case "auth":
            Report.print("Token refresh: \(TokenRefreshBenchmark.calls) concurrent calls (AsyncHTTPClient)", try await TokenRefreshBenchmark.run(rounds: rounds))
        default:
            print("unknown suite \(suite); known: \(suites.joined(separator: ", "))")
            exit(2)
        }
    }
} catch {
    print("benchmark failed: \(error)")
    exit(1)
}
