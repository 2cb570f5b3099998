// The outbox part of the tour: a process enqueues orders in an outbox kept in an SQLite file
// and is killed with SIGKILL while it delivers them; this process opens the same file and
// finishes. The shop carries out each order once per idempotency key.
import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import Trellis
import TrellisSQLite

/// The shop: `POST /orders` carried out once per `Idempotency-Key`, answered 50 ms after it is
/// carried out (a window in which a process may die with the order made and its answer lost),
/// and answered the same way when the key comes again.
final class Shop: Sendable {
    private let state = NIOLockedValueBox<(orders: [String: Int], arrivals: Int)>(([:], 0))

    /// How many orders were carried out, and how many requests arrived.
    var counts: (carriedOut: Int, arrivals: Int) { state.withLockedValue { ($0.orders.count, $0.arrivals) } }

    func install(_ router: Router<BasicRequestContext>) {
        router.post("orders") { [state] request, _ -> Hummingbird.Response in
            let key = request.headers[HTTPField.Name("Idempotency-Key")!] ?? ""
            let number = state.withLockedValue { state in
                state.arrivals += 1
                if let number = state.orders[key] { return number }
                state.orders[key] = state.orders.count + 1
                return state.orders.count
            }
            try await Task.sleep(for: .milliseconds(50))
            return Hummingbird.Response(
                status: .created, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"order":\#(number)}"#))
            )
        }
    }
}

/// `trellis-demo outbox-worker FILE URL`: the process the tour kills. Enqueues twelve orders in
/// the outbox kept in FILE, then delivers them until it is killed.
func runOutboxWorker(file: String, url: URL) async -> Int32 {
    do {
        let outbox = Outbox(client: Client(baseURL: url), storage: try await SQLiteOutboxStorage(path: file))
        for number in 1...12 {
            var request = try Trellis.Request(method: .post, url: url.appending(path: "orders"))
            request.body = Trellis.RequestBody(#"{"item":\#(number)}"#, contentType: "application/json")
            try await outbox.enqueue(request, lane: "customer-\(number % 3)")
        }
        try await outbox.run()
        return 0
    } catch {
        print("the worker failed: \(error)")
        return 1
    }
}

func outboxTour(_ baseURL: URL, shop: Shop) async throws {
    step("An outbox: a process killed with orders queued, and another finishing them, each order once")
    let file = FileManager.default.temporaryDirectory.appending(path: "trellis-demo-outbox-\(UUID().uuidString).sqlite").path
    defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) } }

    let worker = Process()
    worker.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    worker.arguments = ["outbox-worker", file, baseURL.absoluteString]
    try worker.run()
    // The demo's own look every 10 ms, until the shop has carried out three orders (the worker
    // delivers once all twelve are stored).
    while shop.counts.carriedOut < 3 { try await Task.sleep(for: .milliseconds(10)) }
    kill(worker.processIdentifier, SIGKILL)
    worker.waitUntilExit()
    let killed = shop.counts
    print("  process \(worker.processIdentifier) stored 12 orders and was killed (SIGKILL) with \(killed.carriedOut) carried out")

    let storage = try await SQLiteOutboxStorage(path: file)
    let outbox = Outbox(client: Client(baseURL: baseURL), storage: storage)
    let pending = try await outbox.pending()
    print("  this process opens the same file: \(pending.count) orders left, some of them sent already and their answers lost")
    let delivery = Task { try await outbox.run() }
    var delivered = 0
    for await outcome in outbox.outcomes {
        if case .delivered = outcome { delivered += 1 }
        if delivered == pending.count { break }
    }
    delivery.cancel()
    _ = await delivery.result
    try await storage.close()
    let finished = shop.counts
    print("  delivered \(delivered) more: the shop carried out \(finished.carriedOut) orders from \(finished.arrivals) requests, one per key")
}
