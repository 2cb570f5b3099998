import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOConcurrencyHelpers
import NIOCore
import Trellis

/// Backpressure of the realtime streams: a server pushes 64 KiB messages (WebSocket) or events
/// (SSE) as fast as the connection lets it, while the reader takes 1 ms per message. The figure
/// is how far the server gets ahead of the reader at most: what a slow reader costs in memory
/// (the messages in flight sit in socket buffers and the client's small frame buffer). Without
/// backpressure the lead would be everything the server offers. Beside it, how much the
/// process's resident memory grew while reading (server and client share the process).
enum RealtimeBenchmark {
    struct Lead {
        var messagesMiB: Double
        var residentGrowthMiB: Double
    }

    static let messageSize = 64 * 1024
    static var offered: Int {
        ProcessInfo.processInfo.environment["TRELLIS_BENCH_REALTIME_MESSAGES"].flatMap(Int.init) ?? 4096
    }
    static var offeredMiB: Int { offered * messageSize >> 20 }
    /// How many messages the reader reads, slowly, before it stops.
    static let read = 400

    static func run(rounds: Int) async throws -> [Row] {
        var webSocketLeads: [Lead] = []
        var eventLeads: [Lead] = []
        for _ in 0..<rounds {
            webSocketLeads.append(try await webSocketLead())
            eventLeads.append(try await eventStreamLead())
        }
        let offeredMiB = Double(offered * messageSize) / 1_048_576
        func row(_ name: String, _ leads: [Lead]) -> Row {
            let lead = leads.map(\.messagesMiB).max() ?? 0
            let growth = leads.map(\.residentGrowthMiB).max() ?? 0
            return Row(
                name: name, baseline: "offered by the server", baselineValue: offeredMiB, value: lead, unit: "MiB",
                note: String(
                    format: "at most %.1f MiB (%.0f messages) ahead of a reader that read %d; resident memory grew by %.1f MiB",
                    lead, lead * 16, read, growth
                )
            )
        }
        return [row("WebSocket, 64 KiB binary messages", webSocketLeads), row("SSE, 64 KiB events", eventLeads)]
    }

    /// The most MiB the server had written beyond what the reader had read.
    private static func webSocketLead() async throws -> Lead {
        let written = NIOLockedValueBox(0)
        let router = Router(context: BasicWebSocketRequestContext.self)
        let block = ByteBuffer(repeating: 0x5A, count: messageSize)
        router.ws("push") { _, outbound, _ in
            for _ in 0..<offered {
                try await outbound.write(.binary(block))
                written.withLockedValue { $0 += 1 }
            }
        }
        return try await withServer({ _ in }, webSocket: router) { url in
            let client = Client(baseURL: url)
            let start = residentMiB()
            var peak = start
            let socket = try await client.webSocket(for: Trellis.Request(method: .get, url: url.appending(path: "push")))
            var lead = 0
            var count = 0
            for try await _ in socket.messages {
                count += 1
                lead = max(lead, written.withLockedValue { $0 } - count)
                peak = max(peak, residentMiB())
                if count == read { break }
                try await Task.sleep(for: .milliseconds(1))
            }
            await socket.close()
            return Lead(messagesMiB: Double(lead * messageSize) / 1_048_576, residentGrowthMiB: peak - start)
        }
    }

    private static func eventStreamLead() async throws -> Lead {
        let written = NIOLockedValueBox(0)
        let line = "data: " + String(repeating: "x", count: messageSize - 8) + "\n\n"
        return try await withServer({ router in
            router.get("push") { _, _ in
                Response(status: .ok, headers: [.contentType: "text/event-stream"], body: .init { writer in
                    for _ in 0..<offered {
                        try await writer.write(ByteBuffer(string: line))
                        written.withLockedValue { $0 += 1 }
                    }
                    try await writer.finish(nil)
                })
            }
        }) { url in
            let client = Client(baseURL: url)
            let start = residentMiB()
            var peak = start
            var lead = 0
            var count = 0
            for try await _ in client.events(for: try Trellis.Request(method: .get, url: url.appending(path: "push")), reconnects: false) {
                count += 1
                lead = max(lead, written.withLockedValue { $0 } - count)
                peak = max(peak, residentMiB())
                if count == read { break }
                try await Task.sleep(for: .milliseconds(1))
            }
            return Lead(messagesMiB: Double(lead * messageSize) / 1_048_576, residentGrowthMiB: peak - start)
        }
    }
}

/// The process's resident memory now (`VmRSS`), in MiB; 0 where /proc is missing.
func residentMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return Double(line.split(separator: " ").dropFirst().first ?? "").map { $0 / 1024 } ?? 0
}
