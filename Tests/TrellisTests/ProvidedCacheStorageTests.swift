import Foundation
import NIOConcurrencyHelpers
import Testing
import Trellis
import TrellisTesting

/// An ``HTTPCache`` in a storage the user provides, against a real in-process server. The
/// storage here is a dictionary that can fail or damage what it returns: the PostgreSQL
/// storage has its own tests against a real database.
@Suite("The HTTP cache in a storage you provide", .hangGuard)
struct ProvidedCacheStorageTests {
    final class DictionaryStorage: HTTPCacheStorage {
        struct State {
            var entries: [String: HTTPCacheEntry] = [:]
            var failing = false
            var damaging = false
            var reads = 0
        }
        let state = NIOLockedValueBox(State())
        struct Unavailable: Error {}

        func entry(for key: String) async throws -> HTTPCacheEntry? {
            try state.withLockedValue { state in
                state.reads += 1
                guard !state.failing else { throw Unavailable() }
                guard var entry = state.entries[key] else { return nil }
                if state.damaging, !entry.body.isEmpty { entry.body[entry.body.startIndex] ^= 0xFF }
                return entry
            }
        }

        func store(_ entry: HTTPCacheEntry, for key: String) async throws {
            try state.withLockedValue { state in
                guard !state.failing else { throw Unavailable() }
                state.entries[key] = entry
            }
        }

        func removeEntry(for key: String) async throws {
            state.withLockedValue { _ = $0.entries.removeValue(forKey: key) }
        }

        func removeAll() async throws {
            state.withLockedValue { $0.entries = [:] }
        }
    }

    static func withServer(_ body: (ScriptedServer, Request) async throws -> Void) async throws {
        try await ScriptedServer.with({ _ in ScriptedServer.response("200 OK", ["Cache-Control: max-age=60"], body: "the article") }) { server in
            try await body(server, try Request(method: .get, url: server.url.appending(path: "article")))
        }
    }

    /// What one client stored, another client of the storage is served, as the server sent it.
    @Test(arguments: TransportKind.allCases)
    func aStoredResponseIsServedToAnotherClientOfTheStorage(_ kind: TransportKind) async throws {
        try await Self.withServer { server, request in
            let storage = DictionaryStorage()
            _ = try await Client(baseURL: server.url, transport: kind.transport) { $0.cache = HTTPCache(storage: storage, timeLimit: .patientStoreLimit) }.data(for: request)
            let served = try await Client(baseURL: server.url, transport: kind.transport) { $0.cache = HTTPCache(storage: storage, timeLimit: .patientStoreLimit) }.data(for: request)
            #expect(String(decoding: served.body, as: UTF8.self) == "the article")
            #expect(server.requests.count == 1)
        }
    }

    /// A storage shared by clients of different users is held to the cache's own rules: an
    /// answer to a request with credentials is not stored unless it says it may be, so one
    /// user's answer never reaches the other (the pair the in-process cache has in
    /// `FeaturePairTests.theCacheNeverServesOneCallersAnswerToAnother`).
    @Test(arguments: TransportKind.allCases)
    func aSharedStorageNeverServesOneUsersAnswerToAnother(_ kind: TransportKind) async throws {
        try await ScriptedServer.with({ received in
            ScriptedServer.response("200 OK", ["Cache-Control: max-age=60"], body: received.field("Authorization") ?? "none")
        }) { server in
            let storage = DictionaryStorage()
            let request = try Request(method: .get, url: server.url.appending(path: "me"))
            func asUser(_ token: String) async throws -> String {
                let client = Client(baseURL: server.url, transport: kind.transport) {
                    $0.cache = HTTPCache(storage: storage, timeLimit: .patientStoreLimit)
                    $0.defaultHeaders[.authorization] = "Bearer \(token)"
                }
                return String(decoding: try await client.data(for: request).body, as: UTF8.self)
            }
            #expect(try await asUser("ada") == "Bearer ada")
            #expect(try await asUser("bob") == "Bearer bob")
            #expect(server.requests.count == 2)
            #expect(storage.state.withLockedValue { $0.entries.isEmpty })
        }
    }

    /// A storage that fails is a miss each time, and one that returns a damaged body is too:
    /// the call goes to the server and answers what the server sent.
    @Test func aFailingOrDamagingStorageIsAMiss() async throws {
        try await Self.withServer { server, request in
            let storage = DictionaryStorage()
            let client = Client(baseURL: server.url) { $0.cache = HTTPCache(storage: storage, timeLimit: .patientStoreLimit) }
            _ = try await client.data(for: request)
            storage.state.withLockedValue { $0.damaging = true }
            #expect(String(decoding: try await client.data(for: request).body, as: UTF8.self) == "the article")
            #expect(server.requests.count == 2)
            storage.state.withLockedValue { $0.failing = true }
            #expect(String(decoding: try await client.data(for: request).body, as: UTF8.self) == "the article")
            #expect(server.requests.count == 3)
        }
    }

    /// The cache meets its storage as every feature a fleet shares does: with
    /// `whenStorageFails: .refuseCalls` a call whose lookup fails is refused before anything is
    /// sent; with `retryStorageAfter`, the storage is left alone for that long on the client's
    /// clock after it failed, and asked again after.
    @Test func aFailingStorageRefusesCallsOrIsLeftAloneAsItsSettingsSay() async throws {
        try await Self.withServer { server, request in
            let storage = DictionaryStorage()
            storage.state.withLockedValue { $0.failing = true }
            let refusing = Client(baseURL: server.url) {
                $0.cache = HTTPCache(storage: storage, timeLimit: .patientStoreLimit, whenStorageFails: .refuseCalls)
            }
            do {
                _ = try await refusing.data(for: request)
                Issue.record("a call whose storage failed was sent")
            } catch TrellisError.callRefused(let refusal) {
                #expect(refusal.reason == .sharedStorageFailed)
                #expect(refusal.detail.contains("could not read"))
            }
            #expect(server.requests.isEmpty)

            let clock = ManualClock()
            let patient = Client(baseURL: server.url) {
                $0.clock = clock
                $0.cache = HTTPCache(storage: storage, timeLimit: .patientStoreLimit, retryStorageAfter: .seconds(60))
            }
            storage.state.withLockedValue { $0.reads = 0 }
            _ = try await patient.data(for: request)
            storage.state.withLockedValue { $0.failing = false }
            _ = try await patient.data(for: request)
            #expect(storage.state.withLockedValue { $0.reads } == 1)
            #expect(storage.state.withLockedValue { $0.entries.isEmpty })
            clock.advance(by: .seconds(61))
            _ = try await patient.data(for: request)
            #expect(storage.state.withLockedValue { $0.reads } >= 2)
            #expect(storage.state.withLockedValue { $0.entries.count } == 1)
            #expect(server.requests.count == 3)
        }
    }

    /// The cache's refusal meets the stages that send again or share: the retry stage does not
    /// send a refused call again (nothing was sent, and the storage is what failed), and callers
    /// coalescing joins to it are refused with it, never sent on their own.
    @Test(.timeLimit(.minutes(1)))
    func aRefusalForAFailedStorageIsNeitherRetriedNorSentForTheCallersCoalescingJoined() async throws {
        try await Self.withServer { server, request in
            let storage = DictionaryStorage()
            storage.state.withLockedValue { $0.failing = true }
            let client = Client(baseURL: server.url) {
                $0.retryWithoutWaiting(RetryPolicy(maximumRetries: 3))
                $0.resilience.coalescing = Coalescing()
                $0.cache = HTTPCache(storage: storage, timeLimit: .patientStoreLimit, whenStorageFails: .refuseCalls)
            }
            do {
                _ = try await client.data(for: request)
                Issue.record("a call whose storage failed was sent")
            } catch TrellisError.callRefused(let refusal) {
                #expect(refusal.reason == .sharedStorageFailed)
            }
            #expect(storage.state.withLockedValue { $0.reads } == 1, "the refused call was tried again")

            let reasons = try await withThrowingTaskGroup(of: CallRefusal.Reason?.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        do {
                            _ = try await client.data(for: request)
                            return nil
                        } catch TrellisError.callRefused(let refusal) {
                            return refusal.reason
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(reasons == Array(repeating: .sharedStorageFailed, count: 8))
            #expect(server.requests.isEmpty)
        }
    }

    /// A storage that never answers (a database gone away) and shares its fleet's misses: each
    /// operation waits until it is cancelled, and counts.
    final class SilentStorage: HTTPCacheStorage {
        let calls = NIOLockedValueBox<[String]>([])

        private func silence(_ what: String) async throws {
            calls.withLockedValue { $0.append(what) }
            try await Task.sleep(for: .seconds(3600))
        }

        func entry(for key: String) async throws -> HTTPCacheEntry? {
            try await silence("entry")
            return nil
        }

        func store(_ entry: HTTPCacheEntry, for key: String) async throws { try await silence("store") }
        func removeEntry(for key: String) async throws { try await silence("remove") }
        func removeAll() async throws { try await silence("removeAll") }

        func fetchingOnce<Result: Sendable>(_ key: String, _ fetch: () async throws -> Result) async throws -> Result {
            calls.withLockedValue { $0.append("lock") }
            return try await fetch()
        }
    }

    /// A call's lookup, lock, second lookup and store share one time limit: against a storage
    /// that never answers, the lookup spends it, and the call goes to the server without taking
    /// the lock, looking again or storing (each with a limit of its own, a call took four).
    @Test func aCallsOperationsOnTheStorageShareOneTimeLimit() async throws {
        try await Self.withServer { server, request in
            let storage = SilentStorage()
            let client = Client(baseURL: server.url) { $0.cache = HTTPCache(storage: storage, timeLimit: .milliseconds(50)) }
            let answer = try await client.data(for: request)
            #expect(String(decoding: answer.body, as: UTF8.self) == "the article")
            #expect(storage.calls.withLockedValue { $0 } == ["entry"])
            #expect(server.requests.count == 1)
        }
    }
}
