import Foundation
import NIOConcurrencyHelpers
import Testing
import Trellis
import TrellisTesting

@Service
protocol Orders {
    @POST("/orders") @Body("order")
    @IdempotencyKey
    func place(order: OrderRequest) async throws -> PlacedOrder

    @POST("/orders") @Body("order")
    @IdempotencyKey("reference")
    func place(reference: String, order: OrderRequest) async throws -> PlacedOrder
}

struct OrderRequest: Codable, Sendable {
    let item: String
}

@Suite("Idempotency keys against a server that keeps the draft's promises")
struct IdempotencyKeyTests {
    private static func order(_ url: URL, _ item: String = "book") throws -> Request {
        var request = try Request(method: .post, url: url.appending(path: "orders"))
        request.body = RequestBody(#"{"item":"\#(item)"}"#, contentType: "application/json")
        return request
    }

    private static func keys(_ server: ScriptedServer) -> [String] {
        server.requests.compactMap { $0.field("Idempotency-Key") }
    }

    /// The failure that loses writes: the server carried the order out and the connection
    /// broke before its answer. Keyed, the call is retried with the same key and gets the
    /// stored answer: one order. Unkeyed, the POST is not retried, and the caller is told
    /// "failed" about an order that exists.
    @Test(arguments: TransportKind.allCases)
    func aKeyedPOSTWhoseAnswerWasLostIsRetriedAndCarriedOutOnce(_ kind: TransportKind) async throws {
        let orders = IdempotentServer { _ in .resetAfterEffect }
        try await ScriptedServer.with(orders.script) { server in
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.idempotencyKeys = IdempotencyKeySettings()
                $0.retryWithoutWaiting(.standard)
            }
            let placed = try await client.value(for: Self.order(server.url), as: PlacedOrder.self)
            #expect(placed.order == 1)
            #expect(orders.effects == 1)
            let keys = Self.keys(server)
            #expect(keys.count == 2 && Set(keys).count == 1, "one key, on both attempts: \(keys)")
            #expect(keys.first == "\"\(placed.key)\"", "quoted, as the draft's string")

            // The same call unkeyed (its field set by hand, which the server reads and Trellis
            // does not): not retried.
            let unkeyed = Client(baseURL: server.url, transport: kind.transport) { $0.retryWithoutWaiting(.standard) }
            var request = try Self.order(server.url)
            request.headerFields[IdempotencyKeySettings.draftFieldName] = "\"by-hand\""
            await #expect(throws: TrellisError.self) { try await unkeyed.data(for: request) }
            #expect(orders.effects == 2, "the order was carried out, and the caller was told it failed")
        }
    }

    /// While the first request with a key is in progress the server answers `409`: the call
    /// waits as `Retry-After` says and sends again, and gets the answer once it is done.
    @Test func aConflictWhileTheFirstIsInProgressIsWaitedOut() async throws {
        let orders = IdempotentServer(inProgressArrivals: 2)
        try await ScriptedServer.with(orders.script) { server in
            let events = RecordingMonitor()
            let client = Client(baseURL: server.url) {
                $0.idempotencyKeys = IdempotencyKeySettings()
                $0.retryWithoutWaiting(.standard)
                $0.observability.eventMonitors = [events]
            }
            let placed = try await client.value(for: Self.order(server.url), as: PlacedOrder.self)
            #expect(placed.order == 1)
            #expect(orders.effects == 1)
            #expect(orders.conflicts == 2)
            #expect(Set(Self.keys(server)).count == 1 && server.requests.count == 4)
            #expect(events.retries >= 2, "the waits after the 409s are reported as retries: \(events.retries)")
        }
    }

    /// A server that keeps answering `409`, asking for a wait past the call's: the call ends
    /// at once with that `409`, naming its key, rather than waiting.
    @Test func aConflictThatAsksTooLongEndsTheCallNamingTheKey() async throws {
        let orders = IdempotentServer(inProgressArrivals: 1000, conflictRetryAfter: "86400")
        try await ScriptedServer.with(orders.script) { server in
            let client = Client(baseURL: server.url) {
                $0.idempotencyKeys = IdempotencyKeySettings(inProgressWait: .seconds(30))
                $0.retryWithoutWaiting(.standard)
            }
            var request = try Self.order(server.url)
            request.idempotencyKey = IdempotencyKey("order-7")
            let error = await #expect(throws: TrellisError.self) { try await client.data(for: request) }
            guard case .unacceptableStatus(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.status.code == 409)
            #expect(failure.idempotencyKey == "order-7")
            #expect(failure.description.contains("order-7") && failure.description.contains("still in progress"))
            #expect(server.requests.count == 2, "the first, then one after the broken connection: \(server.requests.count)")
        }
    }

    /// The same key with another payload: `422`, a clear error naming the key, never retried.
    @Test func aKeyUsedWithAnotherPayloadIsAClearErrorAndNotRetried() async throws {
        let orders = IdempotentServer()
        try await ScriptedServer.with(orders.script) { server in
            let client = Client(baseURL: server.url) {
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 3, failureClassifier: .transientFailures.or(.statuses([422]))))
            }
            var first = try Self.order(server.url, "book")
            first.idempotencyKey = IdempotencyKey("order-8")
            _ = try await client.data(for: first)
            var other = try Self.order(server.url, "lamp")
            other.idempotencyKey = IdempotencyKey("order-8")
            let error = await #expect(throws: TrellisError.self) { try await client.data(for: other) }
            guard case .unacceptableStatus(let failure) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(failure.status.code == 422 && failure.idempotencyKey == "order-8")
            #expect(failure.description.contains("order-8 was used before for a different request"))
            #expect(orders.mismatches == 1 && orders.effects == 1)
        }
    }

    /// An unkeyed POST to a server that requires a key: the error says so, and how to key it.
    @Test func aServerThatRequiresAKeySaysSoInTheError() async throws {
        let orders = IdempotentServer()
        try await ScriptedServer.with(orders.script) { server in
            let client = Client(baseURL: server.url)
            let error = await #expect(throws: TrellisError.self) { try await client.data(for: Self.order(server.url)) }
            #expect(String(describing: error).contains("the server asks for an idempotency key"))
            #expect(orders.effects == 0)
        }
    }

    /// A key the server could read differently, or could not read, is refused before anything
    /// is sent.
    @Test(arguments: ["", "tab\there", "quote\"d", "é", String(repeating: "k", count: 256)])
    func aKeyThatCannotBeSentIsRefusedBeforeSending(_ key: String) async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("201 Created") }) { server in
            var request = try Self.order(server.url)
            request.idempotencyKey = IdempotencyKey(key)
            let error = await #expect(throws: TrellisError.self) { try await Client(baseURL: server.url).data(for: request) }
            guard case .invalidRequest(let invalid) = error else { Issue.record("\(String(describing: error))"); return }
            #expect(invalid.part == .header("Idempotency-Key"))
            #expect(server.requests.isEmpty)
        }
    }

    /// The key goes with the call wherever it is sent again: a 307 redirect, and a hedge.
    @Test(.timeLimit(.minutes(1)))
    func theKeyFollowsARedirectAndAHedge() async throws {
        let movedArrivals = NIOLockedValueBox(0)
        try await ScriptedServer.with({ received in
            guard received.target == "/orders-moved" else {
                return ScriptedServer.response("307 Temporary Redirect", ["Location: /orders-moved"])
            }
            let number = movedArrivals.withLockedValue { $0 += 1; return $0 }
            // The first attempt's answer is held, so that the hedge answers first.
            return number == 1 ? ScriptedServer.held(ScriptedServer.response("201 Created", body: "first")) : ScriptedServer.response("201 Created", body: "hedge")
        }) { server in
            let client = Client(baseURL: server.url) {
                $0.idempotencyKeys = IdempotencyKeySettings(quotesKey: false)
                $0.resilience.hedging = Hedging(after: .fixed(.milliseconds(1)))
            }
            let response = try await client.data(for: Self.order(server.url))
            server.releaseHeld()
            #expect(String(decoding: response.body, as: UTF8.self) == "hedge")
            let keys = Self.keys(server)
            #expect(keys.count == 4 && Set(keys).count == 1, "two attempts, each redirected, under one bare key: \(keys)")
            #expect(keys.allSatisfy { !$0.hasPrefix("\"") })
        }
    }

    /// Coalescing and the cache never join a keyed call to another: each is an operation of its own.
    @Test(.timeLimit(.minutes(1)))
    func coalescingAndTheCacheNeverMergeKeyedCalls() async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.held(ScriptedServer.response("200 OK", ["Cache-Control: max-age=600"], body: "x")) }) { server in
            let client = Client(baseURL: server.url) {
                $0.resilience.coalescing = Coalescing()
                $0.cache = HTTPCache()
                $0.idempotencyKeys = IdempotencyKeySettings(methods: [.get])
            }
            let request = try Request(method: .get, url: server.url.appending(path: "report"))
            async let first = client.data(for: request)
            async let second = client.data(for: request)
            var arrivals = server.arrivals.makeAsyncIterator()
            _ = await arrivals.next()
            _ = await arrivals.next()
            server.releaseHeld()
            _ = try await (first, second)
            let third = Task { try await client.data(for: request) }
            _ = await arrivals.next()
            server.releaseHeld()
            _ = try await third.value
            #expect(server.requests.count == 3, "two together, then one the cache would have answered")
            #expect(Set(Self.keys(server)).count == 3)
        }
    }

    /// A service's endpoints: `@IdempotencyKey` draws a key per call; `@IdempotencyKey("reference")`
    /// sends the argument as the key, and not in the query.
    @Test func anEndpointKeysItsCalls() async throws {
        let orders = IdempotentServer { _ in .resetAfterEffect }
        try await ScriptedServer.with(orders.script) { server in
            let client = Client(baseURL: server.url) { $0.retryWithoutWaiting(.standard) }
            let api = OrdersService(client: client)
            let first = try await api.place(order: OrderRequest(item: "book"))
            let second = try await api.place(order: OrderRequest(item: "book"))
            #expect(first.order == 1 && second.order == 2 && first.key != second.key)
            let referenced = try await api.place(reference: "ref-42", order: OrderRequest(item: "lamp"))
            let again = try await api.place(reference: "ref-42", order: OrderRequest(item: "lamp"))
            #expect(referenced.key == "ref-42" && again == referenced)
            #expect(orders.effects == 3)
            #expect(!server.requests.contains { $0.target.contains("reference") })
        }
    }

    /// Many keyed POSTs at once through a network that loses answers after the server acted,
    /// stalls, and cuts answers short: every call succeeds, and the server carried out each
    /// exactly once.
    @Test(arguments: TransportKind.allCases)
    func keyedPOSTsThroughAFaultyNetworkAreEachCarriedOutOnce(_ kind: TransportKind) async throws {
        let faults = IdempotencyKeyTests.faults
        let orders = IdempotentServer { key in faults[key.utf8.reduce(0) { ($0 &+ Int($1)) & 0xFFFF } % faults.count] }
        try await ScriptedServer.with(orders.script) { server in
            let client = Client(baseURL: server.url, transport: kind.transport) {
                $0.idempotencyKeys = IdempotencyKeySettings()
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 6))
                // A stalled answer is given up on and sent again; a call slowed by the machine
                // is sent again too, which the key makes harmless.
                $0.timeouts.request = .seconds(2)
            }
            let calls = 48
            let placed = try await withThrowingTaskGroup(of: PlacedOrder.self) { group in
                for number in 0..<calls {
                    group.addTask { try await client.value(for: Self.order(server.url, "item-\(number)"), as: PlacedOrder.self) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(placed.count == calls)
            #expect(orders.effects == calls, "each call carried out once: \(orders.effects) for \(calls)")
            #expect(Set(placed.map(\.order)).count == calls)
        }
    }

    private static let faults = IdempotentServer.Fault.allCases
}

/// Counts the retries a client schedules.
final class RecordingMonitor: ClientEventMonitor {
    private let count = NIOLockedValueBox(0)
    var retries: Int { count.withLockedValue { $0 } }

    func retryScheduled(retry: Int, delay: Duration, cause: RetryCause, for request: Request) {
        count.withLockedValue { $0 += 1 }
    }
}
