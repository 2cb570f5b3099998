#if Postgres
import Foundation
import NIOConcurrencyHelpers
import Testing
import Trellis
import TrellisPostgres

/// The outbox in PostgreSQL, drained by a fleet of `trellis-fleet-worker` processes against a
/// server that keeps the idempotency-key draft's promises and counts each effect once.
@Suite("The outbox drained by a fleet through PostgreSQL", .hangGuard)
struct PostgresOutboxTests {
    private static func order(_ url: URL, _ number: Int) throws -> Request {
        var request = try Request(method: .post, url: url.appending(path: "orders"))
        request.body = RequestBody(#"{"item":"\#(number)"}"#, contentType: "application/json")
        request.idempotencyKey = IdempotencyKey("call-\(number)")
        return request
    }

    /// 1,000 orders in eight lanes, drained by four processes; one is killed with SIGKILL while
    /// the server handles one of its deliveries (sent, its answer not yet stored), at a random
    /// point between the 100th and 400th delivery. Its claims run out with their one-second
    /// lease and the others deliver those calls again, with their keys: the server carried
    /// out every order once, each lane's in order, and the call cut off arrived again.
    @Test func fourProcessesDrainOneOutboxAndTheOnesKilledCallsAreDeliveredByTheOthers() async throws {
        try await PostgresServer.withDatabase { database, postgres in
            let storage = PostgresOutboxStorage(client: postgres, timeLimit: .patientStoreLimit)
            try await storage.createTable()
            let orders = IdempotentServer()
            let victim = NIOLockedValueBox<(pid: pid_t?, killAt: Int, cutKey: String?)>((nil, .max, nil))
            let seen = NIOLockedValueBox(0)
            let arrivals = NIOLockedValueBox<(byWorker: [String: Int], byKey: [String: Int])>(([:], [:]))
            try await ScriptedServer.with({ received in
                let number = seen.withLockedValue { $0 += 1; return $0 }
                let worker = received.field("X-Worker") ?? "none"
                let key = received.field("Idempotency-Key") ?? "none"
                arrivals.withLockedValue { $0.byWorker[worker, default: 0] += 1; $0.byKey[key, default: 0] += 1 }
                let kill = victim.withLockedValue { victim -> pid_t? in
                    guard number >= victim.killAt, let pid = victim.pid, worker == "\(pid)" else { return nil }
                    victim.pid = nil
                    victim.cutKey = key
                    return pid
                }
                if let kill { _ = Foundation.kill(kill, SIGKILL) }
                return orders.script(received)
            }) { server in
                let enqueuer = Outbox(client: Client(baseURL: server.url), storage: storage)
                for number in 0..<1000 {
                    try await enqueuer.enqueue(Self.order(server.url, number), lane: "lane-\(number % 8)")
                }
                let gate = FileManager.default.temporaryDirectory.appending(path: "trellis-gate-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: gate) }
                let workers = try await FleetWorker.start(4, ["outbox-fleet", database.socket, server.url.absoluteString, gate.path])
                victim.withLockedValue { $0 = (workers[0].pid, Int.random(in: 100...400), nil) }
                try Data().write(to: gate)
                var outputs: [String] = []
                for worker in workers { outputs.append(await worker.output()) }

                let cutKey = victim.withLockedValue { $0.cutKey }
                #expect(cutKey != nil && !outputs[0].contains("drained"), "the first worker was killed in a delivery: \(outputs[0].suffix(200))")
                #expect(outputs.dropFirst().allSatisfy { $0.contains("drained") }, "\(outputs.map { $0.suffix(300) })")
                let carried = orders.carriedOut
                #expect(carried.count == 1000 && Set(carried) == Set((0..<1000).map { "call-\($0)" }), "carried out: \(carried.count), distinct: \(Set(carried).count)")
                // Each lane's orders took effect in the order they were enqueued, whichever
                // process delivered them.
                let numbers = carried.compactMap { Int($0.dropFirst("call-".count)) }
                for lane in 0..<8 {
                    let inLane = numbers.filter { $0 % 8 == lane }
                    #expect(inLane == inLane.sorted(), "lane \(lane) out of order")
                }
                #expect(try await storage.entries(deadLetters: false).isEmpty)
                #expect(try await storage.entries(deadLetters: true).isEmpty)
                let (byWorker, byKey) = arrivals.withLockedValue { ($0.byWorker, $0.byKey) }
                #expect(byWorker.count == 4, "each process delivered: \(byWorker)")
                if let cutKey { #expect(byKey[cutKey, default: 0] >= 2, "the call cut off by the kill was delivered again") }
            }
        }
    }
}
#endif
