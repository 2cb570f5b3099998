import Foundation
import Hummingbird
import NIOCore
import SQLiteNIO
import Trellis
import TrellisSQLite

/// The outbox on SQLite, each case taking turns with its baseline round after round:
/// - `enqueue`, stored durably (write-ahead log, `synchronous = FULL`), against a bare `INSERT`
///   of the same bytes through sqlite-nio with the same settings: the floor no durable store
///   goes under on this disk;
/// - delivery: the queued calls delivered by `run()`, four at a time, against the same keyed
///   calls made directly through the same kind of client, four at a time;
/// - memory: the resident growth of delivering 5,000 calls with 100,000 queued, against 5,000
///   with 5,000 queued (entries are read as they are delivered, so the two should match).
enum OutboxBenchmark {
    static let calls = 1_000
    static let memoryCalls = 5_000
    /// A 200-byte JSON order.
    static let body = #"{"item":"sku-0042","quantity":3,"note":""# + String(repeating: "x", count: 142) + #""}"#

    static func run(rounds: Int) async throws -> [Row] {
        try await withServer({ router in
            router.post("orders") { _, _ in Response(status: .created) }
        }) { url in
            try await enqueueing(url, rounds: rounds) + delivering(url, rounds: rounds) + memory(url)
        }
    }

    private static func order(_ url: URL) throws -> Trellis.Request {
        var request = try Trellis.Request(method: .post, url: url.appending(path: "orders"))
        request.body = Trellis.RequestBody(body, contentType: "application/json")
        request.idempotencyKey = .generated
        return request
    }

    private static func file() -> String {
        FileManager.default.temporaryDirectory.appending(path: "trellis-bench-outbox-\(UUID().uuidString).sqlite").path
    }

    private static func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    private static let roomy = OutboxSettings(maximumEntries: 1_000_000)

    private static func enqueueing(_ url: URL, rounds: Int) async throws -> [Row] {
        var p99s: (bare: [Double], outbox: [Double]) = ([], [])
        func outbox() async throws -> Double {
            let path = file()
            defer { remove(path) }
            let storage = try await SQLiteOutboxStorage(path: path)
            let outbox = Outbox(client: Client(baseURL: url), storage: storage, settings: roomy)
            var latencies: [Double] = []
            let total = try await milliseconds {
                for number in 0..<calls {
                    let started = ContinuousClock.now
                    try await outbox.enqueue(order(url), lane: "lane-\(number % 8)")
                    latencies.append(microseconds(since: started))
                }
            }
            try await storage.close()
            p99s.outbox.append(percentile99(latencies))
            return Double(calls) / (total / 1000)
        }
        func bare() async throws -> Double {
            let path = file()
            defer { remove(path) }
            let connection = try await SQLiteConnection.open(storage: .file(path: path))
            _ = try await connection.query("PRAGMA journal_mode = WAL")
            _ = try await connection.query("PRAGMA synchronous = FULL")
            _ = try await connection.query("""
                CREATE TABLE calls (id INTEGER PRIMARY KEY, lane TEXT, method TEXT, url TEXT, fields BLOB, body BLOB,
                    idempotency_key TEXT, enqueued_at REAL, not_before REAL)
                """)
            let fields = ByteBuffer(string: #"[["Content-Type","application/json"]]"#)
            let target = url.appending(path: "orders").absoluteString
            var latencies: [Double] = []
            let total = try await milliseconds {
                for number in 0..<calls {
                    let started = ContinuousClock.now
                    let now = Date().timeIntervalSince1970
                    _ = try await connection.query(
                        "INSERT INTO calls (lane, method, url, fields, body, idempotency_key, enqueued_at, not_before) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        [.text("lane-\(number % 8)"), .text("POST"), .text(target), .blob(fields), .blob(ByteBuffer(string: body)),
                         .text(UUID().uuidString), .float(now), .float(now)]
                    )
                    latencies.append(microseconds(since: started))
                }
            }
            try await connection.close()
            p99s.bare.append(percentile99(latencies))
            return Double(calls) / (total / 1000)
        }
        let (floor, measured) = try await alternated(rounds, bare, outbox)
        return [
            Row(name: "enqueue, calls a second", baseline: "a bare INSERT, same settings", baselineValue: mean(floor), value: mean(measured),
                unit: "/s", note: "mean of \(rounds) alternated rounds; below 1x is slower"),
            Row(name: "enqueue, p99", baseline: "a bare INSERT, same settings", baselineValue: mean(p99s.bare), value: mean(p99s.outbox),
                unit: "µs", note: "mean of the rounds' p99"),
        ]
    }

    private static func delivering(_ url: URL, rounds: Int) async throws -> [Row] {
        var cpu: (direct: [Double], outbox: [Double]) = ([], [])
        func outbox() async throws -> Double {
            let path = file()
            defer { remove(path) }
            let storage = try await SQLiteOutboxStorage(path: path)
            let outbox = Outbox(client: Client(baseURL: url), storage: storage, settings: roomy)
            for number in 0..<calls { try await outbox.enqueue(order(url), lane: "lane-\(number % 8)") }
            let delivery = Task { try await outbox.run() }
            var delivered = 0
            let cpuBefore = processorSeconds()
            let total = await milliseconds {
                for await _ in outbox.outcomes {
                    delivered += 1
                    if delivered == calls { break }
                }
            }
            cpu.outbox.append((processorSeconds() - cpuBefore) * 1e6 / Double(calls))
            delivery.cancel()
            _ = await delivery.result
            try await storage.close()
            return Double(calls) / (total / 1000)
        }
        func direct() async throws -> Double {
            let client = Client(baseURL: url)
            let cpuBefore = processorSeconds()
            defer { cpu.direct.append((processorSeconds() - cpuBefore) * 1e6 / Double(calls)) }
            let total = try await milliseconds {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 {
                        group.addTask { for _ in 0..<(calls / 4) { _ = try await client.data(for: order(url)) } }
                    }
                    try await group.waitForAll()
                }
            }
            return Double(calls) / (total / 1000)
        }
        let (baseline, measured) = try await alternated(rounds, direct, outbox)
        return [
            Row(name: "delivery, calls a second", baseline: "the same calls made directly, 4 at a time", baselineValue: mean(baseline),
                value: mean(measured), unit: "/s", note: "mean of \(rounds) alternated rounds; claims in memory, removals grouped under one flush"),
            Row(name: "delivery, processor time a call", baseline: "the same calls made directly", baselineValue: mean(cpu.direct),
                value: mean(cpu.outbox), unit: "µs", note: "the process's user and system time, the in-process server's included"),
        ]
    }

    private static func memory(_ url: URL) async throws -> [Row] {
        let small = try await growth(url, queued: memoryCalls)
        let large = try await growth(url, queued: 100_000)
        return [
            Row(name: "memory, delivering \(memoryCalls) of 100,000 queued", baseline: "\(memoryCalls) of \(memoryCalls) queued",
                baselineValue: small, value: large, unit: "KiB", note: "resident growth, one run each"),
        ]
    }

    /// The resident growth, in KiB, of delivering `memoryCalls` calls from an outbox holding `queued`.
    private static func growth(_ url: URL, queued: Int) async throws -> Double {
        let path = file()
        defer { remove(path) }
        // One call through the outbox, for its schema; then copies of it, doubling, in one
        // statement each (enqueueing 100,000 calls one by one takes minutes of flushes).
        let first = try await SQLiteOutboxStorage(path: path)
        try await Outbox(client: Client(baseURL: url), storage: first, settings: roomy).enqueue(order(url))
        try await first.close()
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        var held = 1
        while held < queued {
            _ = try await connection.query(
                """
                INSERT INTO trellis_outbox (lane, method, url, fields, body, idempotency_key, enqueued_at, not_before)
                SELECT 'lane-' || (id % 8), method, url, fields, body, idempotency_key || '-' || id || '-' || \(held), enqueued_at, not_before
                FROM trellis_outbox LIMIT \(queued - held)
                """
            )
            held = min(queued, held * 2)
        }
        try await connection.close()
        let storage = try await SQLiteOutboxStorage(path: path)
        let outbox = Outbox(client: Client(baseURL: url), storage: storage, settings: roomy)
        let before = residentKiB("VmRSS:")
        let delivery = Task { try await outbox.run() }
        var delivered = 0
        for await _ in outbox.outcomes {
            delivered += 1
            if delivered == memoryCalls { break }
        }
        let after = residentKiB("VmRSS:")
        delivery.cancel()
        _ = await delivery.result
        try await storage.close()
        return Double(max(0, after - before))
    }

    /// The processor time this process has used, user and system, in seconds.
    private static func processorSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        return user + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    private static func microseconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
    }

    private static func percentile99(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
    }
}
