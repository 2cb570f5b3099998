// The realtime part of the tour: a short stream of server-sent events, decoded as they come,
// and a WebSocket echo, both declared in a service.
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Trellis

@Service
protocol Live {
    @GET("/quotes")
    func quotes() async throws -> EventStream<Quote>

    @WebSocket("/echo")
    func echo() async throws -> WebSocketConnection

    /// A model server's answer, one JSON value per line (as Ollama's `/api/generate`).
    @POST("/api/generate")
    @Body("prompt")
    func generate(prompt: Prompt) async throws -> JSONLines<GeneratedToken>
}

struct Prompt: Codable, Sendable {
    var model: String
    var prompt: String
}

struct GeneratedToken: Codable, Sendable {
    var response: String
    var done: Bool
}

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
        router.post("api/generate") { request, context in
            let prompt = try await request.decode(as: Prompt.self, context: context)
            let words = ["Trellis", " reads", " each", " line", " as", " it", " comes", "."]
            return Hummingbird.Response(status: .ok, headers: [.contentType: "application/x-ndjson"], body: .init { writer in
                for word in words {
                    let token = GeneratedToken(response: word, done: false)
                    try await writer.write(ByteBuffer(data: try JSONEncoder().encode(token) + Data("\n".utf8)))
                    try await Task.sleep(for: .milliseconds(40))
                }
                // The last line, without a newline, carries the prompt back.
                try await writer.write(ByteBuffer(string: #"{"response":" (\#(prompt.model))","done":true}"#))
                try await writer.finish(nil)
            })
        }
    }
}

enum EchoRoutes {
    /// The WebSocket routes: `/echo` sends every message back, then says goodbye with 1000.
    static func router() -> Router<BasicWebSocketRequestContext> {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.ws("echo") { inbound, outbound, _ in
            for try await message in inbound.messages(maxSize: 1 << 20) {
                switch message {
                case .text(let text): try await outbound.write(.text("echo: \(text)"))
                case .binary(let bytes): try await outbound.write(.binary(bytes))
                }
            }
        }
        return router
    }
}

func realtimeTour(_ baseURL: URL) async throws {
    let live = LiveService(baseURL: baseURL)
    step("Server-sent events, each data block decoded as JSON as it arrives")
    var count = 0
    for try await quote in try await live.quotes() {
        print("  \(quote.symbol) \(quote.price)")
        count += 1
        // The server ends the stream after three; the stream would reconnect, so stop here.
        if count == 3 { break }
    }

    step("A JSON Lines stream (a model server's answer to a POST), each value as its line completes")
    print("  ", terminator: "")
    for try await token in try await live.generate(prompt: Prompt(model: "demo-model", prompt: "Say something")) {
        print(token.response, terminator: token.done ? "\n" : "")
    }

    step("A WebSocket echo: text, JSON and binary messages, then a clean close")
    let socket = try await live.echo()
    var replies = socket.messages.makeAsyncIterator()
    try await socket.send("hello over a WebSocket")
    print("  \(try await replies.next().map(describe) ?? "nothing")")
    try await socket.send(json: Quote(symbol: "TRLS", price: 103))
    print("  \(try await replies.next().map(describe) ?? "nothing")")
    try await socket.send(Data([0xDE, 0xAD, 0xBE, 0xEF]))
    print("  \(try await replies.next().map(describe) ?? "nothing")")
    await socket.close(.normalClosure, reason: "tour over")
    print("  closed; the server answered with \(socket.closure.map { "\($0)" } ?? "no close frame")")
}

private func describe(_ message: Trellis.WebSocketMessage) -> String {
    switch message {
    case .text(let text): "text: \(text)"
    case .binary(let data): "binary: \(data.map { String(format: "%02x", $0) }.joined())"
    }
}
