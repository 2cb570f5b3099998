import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import Trellis

/// A stream of a million small JSON values: `client.jsonLines(for:as:)` next to the same body
/// read by hand with AsyncHTTPClient, cut at each newline and decoded with `JSONDecoder`.
enum JSONLinesBenchmark {
    struct Item: Decodable, Sendable {
        var id: Int
        var ok: Bool
    }

    static let values = 1_000_000
    /// One line of the stream: 22 bytes with its newline.
    static let line = #"{"id":1234,"ok":true}"# + "\n"

    /// The server: `values` lines, written 64 KiB at a time.
    static func install(_ router: Router<BasicRequestContext>) {
        let perChunk = (64 * 1024) / line.utf8.count
        let chunk = ByteBuffer(string: String(repeating: line, count: perChunk))
        router.get("lines") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "application/x-ndjson"], body: .init { writer in
                var sent = 0
                while sent < values {
                    let count = min(perChunk, values - sent)
                    try await writer.write(count == perChunk ? chunk : ByteBuffer(string: String(repeating: line, count: count)))
                    sent += count
                }
                try await writer.finish(nil)
            })
        }
    }

    static func run(rounds: Int) async throws -> [Row] {
        try await withServer(install) { url in
            let client = Client(baseURL: url)
            let http = AsyncHTTPClientTransport.shared.httpClient
            let request = try Trellis.Request(method: .get, url: url.appending(path: "lines"))
            let trellis: @Sendable () async throws -> Void = {
                var count = 0
                for try await _ in client.jsonLines(for: request, as: Item.self) { count += 1 }
                guard count == values else { throw BenchmarkFailure(description: "\(count) values") }
            }
            let raw: @Sendable () async throws -> Void = {
                let response = try await http.execute(HTTPClientRequest(url: url.absoluteString + "/lines"), timeout: .seconds(600))
                let decoder = JSONDecoder()
                var pending: [UInt8] = []
                var count = 0
                for try await chunk in response.body {
                    pending.append(contentsOf: chunk.readableBytesView)
                    var start = 0
                    while let newline = pending[start...].firstIndex(of: 0x0A) {
                        _ = try decoder.decode(Item.self, from: Data(pending[start..<newline]))
                        count += 1
                        start = newline + 1
                    }
                    pending.removeFirst(start)
                }
                guard count == values else { throw BenchmarkFailure(description: "\(count) values") }
            }
            try await trellis()  // warm-up
            var rawTimes: [Double] = []
            var trellisTimes: [Double] = []
            for round in 0..<rounds {
                // Alternated, so that a change in the machine's load falls on both alike.
                if round % 2 == 0 {
                    rawTimes.append(try await milliseconds(raw))
                    trellisTimes.append(try await milliseconds(trellis))
                } else {
                    trellisTimes.append(try await milliseconds(trellis))
                    rawTimes.append(try await milliseconds(raw))
                }
            }
            let rate = { (times: [Double]) in Double(values) / (times.reduce(0, +) / Double(times.count) / 1000) }
            return [Row(
                name: "\(values) values of 22 bytes", baseline: "AsyncHTTPClient + newline split + JSONDecoder",
                baselineValue: rate(rawTimes), value: rate(trellisTimes), unit: "values/s",
                note: "mean of \(rounds) alternated rounds; ratio above 1 is faster"
            )]
        }
    }
}
