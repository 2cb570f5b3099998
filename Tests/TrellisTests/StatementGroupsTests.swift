#if SQLite
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
import Trellis
@testable import TrellisSQLite

@Suite("The SQLite outbox's claims in memory, and its statements in groups")
struct StatementGroupsTests {
    private struct Refused: Error {}

    /// Holds the first group's write until the test lets it go, and notes every group.
    private final class HeldWriter: Sendable {
        let groups = NIOLockedValueBox<[[Int]]>([])
        let release: AsyncStream<Void>
        let releaser: AsyncStream<Void>.Continuation
        let failing: Bool

        init(failing: Bool = false) {
            (release, releaser) = AsyncStream.makeStream()
            self.failing = failing
        }

        func write(_ items: [Int]) async throws -> [Int] {
            let isFirst = groups.withLockedValue { groups in
                groups.append(items)
                return groups.count == 1
            }
            if isFirst {
                for await _ in release { break }
            }
            if failing { throw Refused() }
            return items.map { $0 * 10 }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func inputsSubmittedDuringAStatementRunTogetherInTheNextAndEachGetsItsOwnOutput() async throws {
        let writer = HeldWriter()
        let commit = StatementGroups<Int, Int>(writer.write)
        let answers = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            group.addTask { (0, try await commit.submit(0)) }
            while writer.groups.withLockedValue({ $0.count }) < 1 { await Task.yield() }
            for item in 1...7 { group.addTask { (item, try await commit.submit(item)) } }
            while commit.waitingCount < 7 { await Task.yield() }
            writer.releaser.yield()
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(answers == Dictionary(uniqueKeysWithValues: (0...7).map { ($0, $0 * 10) }))
        let groups = writer.groups.withLockedValue { $0 }
        #expect(groups.count == 2)
        #expect(groups.first == [0])
        #expect(groups.last?.sorted() == Array(1...7))
        #expect(commit.waitingCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func aGroupThatFailsFailsEachOfItsInputsAndTheNextRunsAfter() async throws {
        let writer = HeldWriter(failing: true)
        let commit = StatementGroups<Int, Int>(writer.write)
        let failures = NIOLockedValueBox(0)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { if (try? await commit.submit(0)) == nil { failures.withLockedValue { $0 += 1 } } }
            while writer.groups.withLockedValue({ $0.count }) < 1 { await Task.yield() }
            for item in 1...3 {
                group.addTask { if (try? await commit.submit(item)) == nil { failures.withLockedValue { $0 += 1 } } }
            }
            while commit.waitingCount < 3 { await Task.yield() }
            writer.releaser.yield()
        }
        #expect(failures.withLockedValue { $0 } == 4)
        #expect(writer.groups.withLockedValue { $0.count } == 2)
    }

    /// When every entry below was enqueued: a fixed moment, so that what is due does not hang
    /// on how fast a loaded machine runs the test.
    private static let enqueued = Date(timeIntervalSince1970: 1_000_000)

    private static func entry(lane: String) -> OutboxEntry {
        OutboxEntry(
            id: 0, lane: lane, method: .post, url: "http://127.0.0.1:1/orders", headerFields: [:], body: nil,
            idempotencyKey: UUID().uuidString, enqueuedAt: enqueued
        )
    }

    @Test func aClaimedCallIsNeitherClaimedAgainNorDueUntilItsEndIsWritten() async throws {
        let path = FileManager.default.temporaryDirectory.appending(path: "trellis-claims-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let storage = try await SQLiteOutboxStorage(path: path)
        let now = Self.enqueued.addingTimeInterval(1)
        let first = try #require(try await storage.insert(Self.entry(lane: "a"), limit: 10))
        let second = try #require(try await storage.insert(Self.entry(lane: "b"), limit: 10))
        let behindFirst = try #require(try await storage.insert(Self.entry(lane: "a"), limit: 10))

        #expect(try await storage.claimNext(at: now, leaseFor: .seconds(30))?.id == first.id)
        #expect(try await storage.claimNext(at: now, leaseFor: .seconds(30))?.id == second.id)
        // The third waits behind the first, which is claimed but still in the file.
        #expect(try await storage.claimNext(at: now, leaseFor: .seconds(30)) == nil)
        #expect(try await storage.nextDue(at: now) == nil)

        let later = now.addingTimeInterval(60)
        try await storage.reschedule(first.id, notBefore: later, failure: "503")
        try await storage.delivered(second.id)
        #expect(try await storage.entries(deadLetters: false).map(\.id) == [first.id, behindFirst.id])
        #expect(try await storage.claimNext(at: now, leaseFor: .seconds(30)) == nil)
        #expect(try await storage.nextDue(at: now).map { abs($0.timeIntervalSince(later)) < 0.001 } == true)
        #expect(try await storage.claimNext(at: later, leaseFor: .seconds(30))?.id == first.id)

        // Deliverers that look at once are each given a different call, one per lane.
        let lanes = ["c", "d", "e", "f", "g", "h"]
        for lane in lanes + lanes { _ = try await storage.insert(Self.entry(lane: lane), limit: 100) }
        let claimed = try await withThrowingTaskGroup(of: OutboxEntry?.self) { group in
            for _ in 0..<8 { group.addTask { try await storage.claimNext(at: now, leaseFor: .seconds(30)) } }
            return try await group.reduce(into: [OutboxEntry]()) { if let entry = $1 { $0.append(entry) } }
        }
        #expect(claimed.count == lanes.count)
        #expect(Set(claimed.map(\.lane)) == Set(lanes))

        // An outbox that starts again on the storage takes the calls claimed before.
        try await storage.releaseClaims()
        #expect(try await storage.claimNext(at: later, leaseFor: .seconds(30))?.id == first.id)
        try await storage.close()
    }
}
#endif
