import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Testing
import Trellis
import TrellisTesting

/// Records the waits a retry policy asks for and returns at once, on a clock that moves
/// itself by each: retries are tested without sleeping in real time.
final class RecordingSleeper: Sendable {
    let clock: ManualClock

    init(startingAt date: Date = Date()) {
        clock = ManualClock(startingAt: date, advancesWhenSleeping: true)
    }

    var recorded: [Duration] { clock.sleeps }

    /// Sets a client's retries to `policy(maximumRetries:)`, on this clock.
    func retry(_ configuration: inout Client.Configuration, maximumRetries: Int = 2, _ configure: (inout RetryPolicy) -> Void = { _ in }) {
        configuration.retry = policy(maximumRetries: maximumRetries, configure)
        configuration.clock = clock
    }

    /// A policy with half of each jitter's range, so that waits are known.
    func policy(maximumRetries: Int = 2, _ configure: (inout RetryPolicy) -> Void = { _ in }) -> RetryPolicy {
        var policy = RetryPolicy(maximumRetries: maximumRetries, random: { 0.5 })
        configure(&policy)
        return policy
    }
}

/// The faults a client meets in the wild, each of which must end promptly in an error the
/// caller can switch on.
enum Fault: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case connectionRefused
    case unknownHost
    case closedBeforeResponding
    case resetMidBody
    case truncatedChunkedBody
    case contentLengthLongerThanBody
    case headersNeverArrive
    case bodyTricklesForever
    case invalidJSON
    case wrongContentType
    case emptyBodyForJSON
    case serviceUnavailableWithRetryAfter
    case tooManyRequests
    case redirectLoop

    var testDescription: String { rawValue }

    enum Expected {
        case connectionFailed(String?)
        case timedOut
        case decodingFailed(String)
        case status(Int, attempts: Int)
        case redirectFailed
    }

    var expected: Expected {
        switch self {
        case .connectionRefused: .connectionFailed("connection refused")
        case .unknownHost: .connectionFailed("unknown host")
        case .closedBeforeResponding, .resetMidBody, .truncatedChunkedBody, .contentLengthLongerThanBody: .connectionFailed(nil)
        case .headersNeverArrive, .bodyTricklesForever: .timedOut
        case .invalidJSON: .decodingFailed("not valid JSON")
        case .wrongContentType: .decodingFailed("the response is text/html, not JSON")
        case .emptyBodyForJSON: .decodingFailed("the body is empty")
        case .serviceUnavailableWithRetryAfter: .status(503, attempts: 3)
        case .tooManyRequests: .status(429, attempts: 3)
        case .redirectLoop: .redirectFailed
        }
    }
}

struct Article: Decodable {
    var id: Int
    var title: String
}

@Suite("Faults survived")
struct FaultIntegrationTests {
    // Promptly: a hang fails the test at its time limit rather than by a clock in the test.
    @Test(.hangGuard, arguments: TransportKind.allCases, Fault.allCases)
    func eachFaultEndsInAnErrorTheCallerCanHandle(_ kind: TransportKind, fault: Fault) async throws {
        let raw = try await FaultServer()
        let flaky = FlakyRoutes()
        let sleeper = RecordingSleeper()
        // Every event of the call, so that an unexpected retry says why it happened.
        let events = EventLog()
        defer { Task { try? await raw.stop() } }
        try await TestServer.with({ router in
            TestRoutes.install(router)
            flaky.install(router)
        }) { url in
            // Short for the faults that are timeouts; long for the rest, so that a slow attempt
            // under the load of the parallel suite is not a timeout that gets retried (a hop of
            // the redirect loop has taken more than 20 s under ThreadSanitizer).
            let isTimeout = fault == .headersNeverArrive || fault == .bodyTricklesForever
            let client = Client(baseURL: url, transport: kind.transport) {
                $0.timeouts.request = isTimeout ? .seconds(2) : .seconds(600)
                sleeper.retry(&$0)
                $0.observability.eventMonitors = [events]
            }
            let target: URL
            switch fault {
            case .connectionRefused: target = URL(string: "http://127.0.0.1:1/posts")!
            case .unknownHost: target = URL(string: "http://trellis-test.invalid/posts")!
            case .closedBeforeResponding: target = raw.url.appending(path: "close")
            case .resetMidBody: target = raw.url.appending(path: "reset")
            case .truncatedChunkedBody: target = raw.url.appending(path: "truncated-chunked")
            case .contentLengthLongerThanBody: target = raw.url.appending(path: "short")
            case .headersNeverArrive: target = raw.url.appending(path: "silent")
            case .bodyTricklesForever: target = url.appending(path: "trickle")
            case .invalidJSON: target = url.appending(path: "invalid-json")
            case .wrongContentType: target = url.appending(path: "html")
            case .emptyBodyForJSON: target = url.appending(path: "status/200")
            case .serviceUnavailableWithRetryAfter: target = URL(string: url.absoluteString + "/flaky/503?status=503&failures=10&retryAfter=1")!
            case .tooManyRequests: target = URL(string: url.absoluteString + "/flaky/429?status=429&failures=10")!
            case .redirectLoop: target = url.appending(path: "loop/0")
            }
            let error = await #expect(throws: TrellisError.self) {
                _ = try await client.value(for: Request(method: .get, url: target), as: Article.self)
            }
            switch (fault.expected, error) {
            case (.connectionFailed(let reason), .connectionFailed(let failure)?):
                if let reason { #expect(failure.reason.contains(reason), "\(failure)") }
                // Retried as a connection failure, with growing waits.
                #expect(sleeper.recorded.count == 2, "\(events.events)")
            case (.timedOut, .timedOut?):
                #expect(sleeper.recorded.count == 2, "\(events.events)")
                if fault == .headersNeverArrive {
                    // The server never closes these: each attempt's connection is closed by
                    // the client when it gives up, none is left open. (Under load an attempt
                    // can run out of time before its connection is even accepted, so there
                    // may be fewer than 3.)
                    for await _ in raw.closes where raw.connectionCounts.closed == raw.connectionCounts.opened { break }
                    #expect((1...3).contains(raw.connectionCounts.opened))
                }
            case (.decodingFailed(let excerpt), .decodingFailed(let failure)?):
                #expect("\(failure)".contains(excerpt), "\(failure)")
                #expect(sleeper.recorded.isEmpty, "\(events.events)")
            case (.status(let code, let attempts), .unacceptableStatus(let failure)?):
                #expect(failure.status.code == code)
                #expect(flaky.attempts(for: "\(code)") == attempts)
                if fault == .serviceUnavailableWithRetryAfter {
                    #expect(sleeper.recorded == [.seconds(1), .seconds(1)])
                } else {
                    #expect(sleeper.recorded == [.milliseconds(150), .milliseconds(300)])
                }
            case (.redirectFailed, .redirectFailed?):
                #expect(sleeper.recorded.isEmpty, "\(events.events)")
            default:
                Issue.record("\(fault) on \(kind): expected \(fault.expected), got \(String(describing: error))")
            }
        }
    }

    /// A buffered call with a body takes another way through AsyncHTTPClient than one without
    /// (the async API, its body read in a task the deadline cancels): its answer is held to
    /// the request's timeout all the same.
    @Test(.hangGuard, arguments: TransportKind.allCases)
    func aPostWhoseAnswerTricklesEndsAtTheRequestTimeout(_ kind: TransportKind) async throws {
        try await TestServer.with({ FlakyRoutes().install($0) }) { url in
            let client = Client(baseURL: url, transport: kind.transport) { $0.timeouts.request = .seconds(1) }
            let error = await #expect(throws: TrellisError.self) {
                _ = try await client.data(for: Request(method: .post, url: url.appending(path: "trickle"), body: RequestBody("{}")))
            }
            guard case .timedOut(let failure)? = error else {
                Issue.record("expected timedOut, got \(String(describing: error))")
                return
            }
            #expect(failure.timeout == .seconds(1))
        }
    }
}
