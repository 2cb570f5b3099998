// The realtime part of the tour: a short stream of server-sent events, decoded as they come.
import Foundation
import Hummingbird
import Trellis

struct Quote: Codable, Sendable {
    var symbol: String
    var price: Double
}

enum QuoteRoutes {
    static func install(_ router: Router<BasicRequestContext>) {
        router.get("quotes") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "text/event-stream"], body: .init { writer in
                try await writer.write(ByteBuffer(string: ": a comment the client skips\nretry: 1000\n\n"))
                for (index, price) in [101.5, 102.25, 99.75].enumerated() {
                    try await writer.write(ByteBuffer(string: "id: \(index + 1)\ndata: {\"symbol\": \"TRLS\",\n"))
                    try await writer.write(ByteBuffer(string: "data: \"price\": \(price)}\n\n"))
                    try await Task.sleep(for: .milliseconds(100))
                }
                try await writer.finish(nil)
            })
        }
    }
}

func realtimeTour(_ baseURL: URL) async throws {
    let client = Client(baseURL: baseURL)
    step("Server-sent events, each data block decoded as JSON as it arrives")
    let request = try Trellis.Request(method: .get, url: baseURL.appending(path: "quotes"))
    for try await quote in client.events(for: request, as: Quote.self, reconnects: false) {
        print("  \(quote.symbol) \(quote.price)")
    }
}
