import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Calls that change something, kept in durable storage until the server gives them a final
/// answer: a call handed to ``enqueue(_:lane:)`` is stored before it returns, then delivered in
/// the background through the client's own pipeline (tokens, rate limit, breaker, pauses,
/// retries) with its idempotency key, and delivered again after a crash or a restart.
///
/// ```swift
/// let outbox = Outbox(client: client, storage: try await SQLiteOutboxStorage(path: "outbox.sqlite"))
/// let delivery = Task { try await outbox.run() }
/// let id = try await outbox.enqueue(request, lane: "account-42")
/// for await outcome in outbox.outcomes { … }
/// ```
///
/// Calls of one lane are delivered in the order they were enqueued, each after the one before
/// has its final answer; lanes go independently, ``OutboxSettings/concurrency`` at once. A call
/// the server refuses for good (a `4xx` other than `408`, `409`, `425` and `429`), or that fails
/// ``OutboxSettings/maximumAttempts`` times or grows older than ``OutboxSettings/maximumAge``, is
/// a dead letter (``deadLetters()``), kept with the answer, until removed or retried.
///
/// Each delivery sends the call's idempotency key, the same after a crash: on a server that
/// honours it, a call delivered twice (its answer lost, or the process killed before it could
/// record it) is carried out once. See <doc:CallsThatMustNotBeLost>.
public final class Outbox: Sendable {
    private let client: Client
    private let storage: any OutboxStorage
    private let settings: OutboxSettings
    private let logger: Logger
    private let wakeups = Wakeups()
    /// The calls this process is delivering, whose claims it renews.
    private let inFlight = NIOLockedValueBox<Set<Int64>>([])
    private let outcomeSink: AsyncStream<OutboxOutcome>.Continuation

    /// Each call's final answer as it comes: delivered, or a dead letter. For one consumer; what
    /// nobody reads is kept, up to the newest 1,000.
    public let outcomes: AsyncStream<OutboxOutcome>

    /// An outbox that keeps its calls in `storage` and delivers them through `client`.
    public init(client: Client, storage: any OutboxStorage, settings: OutboxSettings = OutboxSettings()) {
        self.client = client
        self.storage = storage
        self.settings = settings
        logger = client.configuration.logger
        (outcomes, outcomeSink) = AsyncStream.makeStream(of: OutboxOutcome.self, bufferingPolicy: .bufferingNewest(1000))
    }

    /// Stores `request` to be delivered in `lane`, and returns its id once it is stored durably.
    ///
    /// The call's key is its ``Request/idempotencyKey`` (drawn now, for `.generated`), or a new
    /// one.
    ///
    /// - Throws: ``OutboxError`` when the outbox is full, the body is larger than the limit or
    ///   is a stream, or the storage fails; ``TrellisError/invalidRequest(_:)`` for a key that
    ///   cannot be sent. Nothing is stored then.
    @discardableResult
    public func enqueue(_ request: Request, lane: String = "") async throws -> Int64 {
        let body: Data?
        switch request.body?.storage {
        case nil: body = nil
        case .bytes(let buffer): body = Data(buffer: buffer)
        case .stream, .replayableStream:
            throw OutboxError(.bodyCannotBeStored, "\(RequestLog.summary(request)) has a streamed body, which cannot be stored to be sent again; give it as bytes")
        }
        if let body, body.count > settings.maximumPayloadSize {
            throw OutboxError(.payloadTooLarge, "the body of \(RequestLog.summary(request)) is \(body.count) bytes, more than the \(settings.maximumPayloadSize) the outbox stores")
        }
        let key = (request.idempotencyKey ?? .generated).draw()
        if let problem = IdempotencyKey.problem(with: key) {
            throw TrellisError.invalidRequest(InvalidRequest(.header(IdempotencyKeySettings.draftFieldName.rawName), problem))
        }
        let entry = OutboxEntry(
            id: 0, lane: lane, method: request.method, url: request.urlString, headerFields: request.headerFields,
            body: body, idempotencyKey: key, enqueuedAt: client.configuration.clock.now
        )
        let stored: OutboxEntry?
        do {
            stored = try await storage.insert(entry, limit: settings.maximumEntries)
        } catch let error as OutboxError {
            throw error
        } catch {
            throw OutboxError(.storageFailed, "its storage failed to store \(RequestLog.summary(request)): \(error)")
        }
        guard let stored else {
            throw OutboxError(.full, "it holds \(settings.maximumEntries) calls already (maximumEntries); \(RequestLog.summary(request)) was not stored")
        }
        wakeups.signal()
        return stored.id
    }

    /// The calls waiting or being delivered, in order.
    public func pending() async throws -> [OutboxEntry] {
        try await storage.entries(deadLetters: false)
    }

    /// The calls that will not be sent again, with why and, for a refusal, the server's answer.
    public func deadLetters() async throws -> [OutboxEntry] {
        try await storage.entries(deadLetters: true)
    }

    /// Removes a call, waiting or dead.
    public func remove(_ id: Int64) async throws {
        try await storage.remove(id)
    }

    /// Sends a dead letter again, its attempts counted from zero.
    public func retry(_ id: Int64) async throws {
        try await storage.revive(id)
        wakeups.signal()
    }

    /// Delivers the stored calls, and those enqueued meanwhile, until the task is cancelled.
    /// Calls a process died delivering are delivered again, with their keys: at once from a
    /// storage one process uses, once their claims' leases run out from one a fleet shares.
    /// Run one per outbox.
    public func run() async throws {
        try await storage.releaseClaims()
        await withDiscardingTaskGroup { group in
            for _ in 0..<settings.concurrency {
                group.addTask { await self.deliverWhileRunning() }
            }
            group.addTask { await self.renewClaimsWhileRunning() }
        }
    }

    /// Renews the claims of the calls being delivered, every third of their lease.
    private func renewClaimsWhileRunning() async {
        let clock = client.configuration.clock
        while !Task.isCancelled {
            try? await clock.sleep(for: settings.claimLease / 3)
            let ids = inFlight.withLockedValue { $0 }
            guard !ids.isEmpty, !Task.isCancelled else { continue }
            do {
                try await storage.renewClaims(Array(ids), leaseFor: settings.claimLease)
            } catch {
                logger.warning("the outbox could not renew its claims on \(ids.count) calls (\(error)); another process may deliver them too, with their keys")
            }
        }
    }

    /// One of ``run()``'s deliverers: claims the next call due, sends it, and waits when none is
    /// due. How a delivery ended is recorded beside the next one's sending, one recording at a
    /// time: the disk's flush of one call's end overlaps the network time of the next. Buys
    /// SQLite delivery 0.45x of direct calls against 0.38x awaited (`Benchmarks/README.md`).
    private func deliverWhileRunning() async {
        let clock = client.configuration.clock
        await withTaskGroup(of: Void.self) { recordings in
            var isRecording = false
            while !Task.isCancelled {
                let seen = wakeups.generation
                let entry: OutboxEntry?
                do {
                    entry = try await storage.claimNext(at: clock.now, leaseFor: settings.claimLease)
                } catch {
                    if Task.isCancelled { return }
                    logger.warning("the outbox could not read its storage (\(error)); it tries again in a second")
                    await wakeups.wait(after: seen, atMost: .seconds(1), on: clock)
                    continue
                }
                guard let entry else {
                    let now = clock.now
                    let due = try? await storage.nextDue(at: now)
                    let wait = due.map { Duration.saturating(seconds: $0.timeIntervalSince(now)) } ?? .seconds(60)
                    let longest = storage.pollInterval.map { min($0, .seconds(60)) } ?? .seconds(60)
                    await wakeups.wait(after: seen, atMost: min(max(wait, .milliseconds(1)), longest), on: clock)
                    continue
                }
                inFlight.withLockedValue { _ = $0.insert(entry.id) }
                let ending = await send(entry)
                if isRecording { await recordings.next() }
                isRecording = true
                recordings.addTask {
                    // Until its end is recorded the call keeps its claim, and holds its lane.
                    if let ending { await self.record(ending, of: entry) }
                    self.inFlight.withLockedValue { _ = $0.remove(entry.id) }
                    self.wakeups.signal()
                }
            }
        }
    }

    /// How a delivery ended, to be recorded.
    private enum Ending: Sendable {
        /// The server's final answer: a success, or a redirect not followed.
        case delivered(HTTPResponse.Status)
        /// A failure worth another delivery, after what the server asked, if it did.
        case failed(String, asked: Duration?)
        /// A call that will not be sent again.
        case dead(reason: String, answer: Response<Data>?)
    }

    /// Every answer is taken as it comes: the outbox decides what each status means.
    private static let everyStatus = Set(100...599)

    /// Sends `entry` once through the client; `nil` when the outbox is stopped meanwhile.
    private func send(_ entry: OutboxEntry) async -> Ending? {
        let clock = client.configuration.clock
        if clock.now.timeIntervalSince(entry.enqueuedAt) > settings.maximumAge.inSeconds {
            return .dead(reason: "older than maximumAge (\(settings.maximumAge)) before it was delivered", answer: nil)
        }
        let response: Response<Data>
        do {
            response = try await client.data(for: request(of: entry), accepting: Self.everyStatus)
        } catch is CancellationError {
            return nil
        } catch TrellisError.invalidRequest(let invalid) {
            return .dead(reason: "it cannot be sent: \(invalid)", answer: nil)
        } catch TrellisError.callRefused(let refusal) {
            return .failed("\(refusal)", asked: refusal.retryAt.map { Duration.saturating(seconds: $0.timeIntervalSince(clock.now)) })
        } catch {
            if Task.isCancelled { return nil }
            return .failed("\(error)", asked: nil)
        }
        let code = response.status.code
        switch code {
        case 200..<400:
            return .delivered(response.status)
        case 408, 409, 425, 429, 500...:
            let asked = response.headerFields[.retryAfter].flatMap { RetryAfter.delay($0, now: clock.now) }
            return .failed("answered \(code) \(response.status.reasonPhrase)", asked: asked)
        default:
            return .dead(reason: "the server refused it: \(code) \(response.status.reasonPhrase)", answer: response)
        }
    }

    /// Records `ending` in the storage, and gives the outcome once it is recorded.
    private func record(_ ending: Ending, of entry: OutboxEntry) async {
        switch ending {
        case .delivered(let status):
            // Stopped before it is recorded, the call is sent again after a restart, under its
            // key: the server answers from what it stored.
            guard await record("the delivery", of: entry, { try await self.storage.delivered(entry.id) }) else { return }
            outcomeSink.yield(.delivered(id: entry.id, status: status))
        case .failed(let failure, let asked):
            await retryLater(entry, failure: failure, after: asked)
        case .dead(let reason, let answer):
            await deadLetter(entry, reason: reason, answer: answer)
        }
    }

    /// Records how `entry`'s delivery ended, again and again until the storage takes it (a disk
    /// that was full, a database that was down): until then the call's lane cannot go on, and a
    /// call left marked as being delivered would hold it until a restart. Returns whether it was
    /// recorded; stopped before it is, the call is delivered again, with its key, when an outbox
    /// next starts on the storage (or, in a fleet, once its claim's lease has run out).
    @discardableResult
    private func record(_ what: String, of entry: OutboxEntry, _ operation: @Sendable () async throws -> Void) async -> Bool {
        let clock = client.configuration.clock
        var failures = 0
        while !Task.isCancelled {
            do {
                try await operation()
                return true
            } catch {
                // Stopped: the storage's error is the stop's.
                if Task.isCancelled { return false }
                let wait = settings.initialDelay.doubled(failures, atMost: settings.maximumDelay)
                failures += 1
                logger.warning("the outbox could not record \(what) of call \(entry.id) (\(error)); it tries again in \(wait)")
                try? await clock.sleep(for: wait)
            }
        }
        return false
    }

    /// The request `entry` stands for, with its key.
    private func request(of entry: OutboxEntry) throws -> Request {
        guard let url = URL(string: entry.url) else {
            throw TrellisError.invalidRequest(InvalidRequest(.url, "the stored URL \(entry.url) does not parse"))
        }
        var request = try Request(method: entry.method, url: url, headerFields: entry.headerFields)
        // The stored fields carry the content type already.
        request.body = entry.body.map { RequestBody($0, contentType: nil) }
        request.idempotencyKey = IdempotencyKey(entry.idempotencyKey)
        return request
    }

    /// Makes `entry` due again after its backoff, or what the server `asked` when that is
    /// longer, within ``OutboxSettings/maximumDelay`` (a server that asks for a year is tried
    /// again then, and its call ends at ``OutboxSettings/maximumAge`` as every other's); or a
    /// dead letter past the limits.
    private func retryLater(_ entry: OutboxEntry, failure: String, after asked: Duration?) async {
        let attempts = entry.attempts + 1
        guard attempts < settings.maximumAttempts else {
            await deadLetter(entry, reason: "\(attempts) deliveries failed (maximumAttempts), the last: \(failure)", answer: nil)
            return
        }
        let backoff = settings.initialDelay.doubled(attempts - 1, atMost: settings.maximumDelay)
        let wait = min(max(asked ?? .zero, backoff), settings.maximumDelay)
        let notBefore = client.configuration.clock.now.addingTimeInterval(wait.inSeconds)
        await record("the failed delivery", of: entry) { try await self.storage.reschedule(entry.id, notBefore: notBefore, failure: failure) }
    }

    private func deadLetter(_ entry: OutboxEntry, reason: String, answer: Response<Data>?) async {
        guard await record("the dead letter", of: entry, { try await self.storage.deadLetter(entry.id, reason: reason, answer: answer) }) else { return }
        var dead = entry
        dead.lastFailure = reason
        dead.finalAnswer = answer
        outcomeSink.yield(.deadLettered(dead))
    }
}
