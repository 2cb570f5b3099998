import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore

/// The coalesced calls in flight, by what makes calls identical.
final class InFlightCalls: Sendable {
    /// What two calls must share to share a request.
    struct Key: Hashable, Sendable {
        var method: String
        var url: String
        /// `name: value` of each field that matters, sorted.
        var fields: [String]
        var accessTokenLabel: String?
        var cachePolicy: String
        var bufferLimit: Int
    }

    /// How a shared call ended, for the callers that joined it.
    enum Outcome: Sendable {
        case answered(HTTPResponse, ByteBuffer)
        case failed(any Error)
        /// The caller whose request it was is gone: each joined caller starts again.
        case abandoned
    }

    /// Callers waiting for the call under one key.
    private struct Flight {
        var joined: [UInt64: CheckedContinuation<Outcome?, any Error>] = [:]
    }

    private struct State {
        var flights: [Key: Flight] = [:]
        var nextCaller: UInt64 = 0
    }

    let coalescing: Coalescing
    private let state = NIOLockedValueBox(State())

    init(_ coalescing: Coalescing) {
        self.coalescing = coalescing
    }

    /// The key of `request`.
    func key(for request: Request, bufferLimit: Int) -> Key {
        let ignored = coalescing.ignoredFields
        let fields = request.headerFields.compactMap { field in
            ignored.contains(field.name) ? nil : "\(field.name.canonicalName): \(field.value)"
        }
        return Key(
            method: request.method.rawValue,
            url: request.urlString,
            fields: fields.sorted(),
            accessTokenLabel: request.accessToken?.label,
            cachePolicy: request.cachePolicy.map { String(describing: $0) } ?? "",
            bufferLimit: bufferLimit
        )
    }

    /// Joins the call in flight under `key` (calling `joined` as it does) and returns how it
    /// ended, or returns `nil` when there was none: the caller's call is then the one in
    /// flight, and it must ``finish(_:with:)`` it. A caller that is the first attempt of a
    /// hedged call stops waiting, with `CancellationError`, when a hedge answers first.
    func join(_ key: Key, calledOffBy cancellation: AttemptCancellation? = nil, joined: () -> Void) async throws -> Outcome? {
        let caller = state.withLockedValue { state in
            state.nextCaller += 1
            return state.nextCaller
        }
        func wait() async throws -> Outcome? {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Outcome?, any Error>) in
                    let joinedOne = self.state.withLockedValue { state -> Bool in
                        guard state.flights[key] != nil else {
                            state.flights[key] = Flight()
                            return false
                        }
                        state.flights[key]?.joined[caller] = continuation
                        return true
                    }
                    guard joinedOne else { return continuation.resume(returning: nil) }
                    joined()
                    // Cancelled, or called off, before the handlers could find it.
                    if Task.isCancelled || cancellation?.isCalledOff == true { self.leave(key, caller) }
                }
            } onCancel: {
                self.leave(key, caller)
            }
        }
        guard let cancellation else { return try await wait() }
        return try await cancellation.exchange(cancelledBy: { self.leave(key, caller) }, wait)
    }

    /// Ends the call in flight under `key`, giving `outcome` to every caller that joined it.
    func finish(_ key: Key, with outcome: Outcome) {
        let joined = state.withLockedValue { $0.flights.removeValue(forKey: key)?.joined ?? [:] }
        for continuation in joined.values { continuation.resume(returning: outcome) }
    }

    /// Takes a cancelled caller out of the flight it joined.
    private func leave(_ key: Key, _ caller: UInt64) {
        let continuation = state.withLockedValue { $0.flights[key]?.joined.removeValue(forKey: caller) }
        continuation?.resume(throwing: CancellationError())
    }
}
