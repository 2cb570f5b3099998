/// Runs an operation against a time limit.
enum Deadline {
    private enum Outcome<Value: Sendable>: Sendable {
        case finished(Value)
        case expired
    }

    /// The operation's result, or ``TrellisError/timedOut(_:)`` once `limit` has passed; the
    /// operation is cancelled then, which makes the transport close the connection.
    static func run<Value: Sendable>(
        _ limit: Duration,
        describing request: Request,
        _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let outcome = try await withThrowingTaskGroup(of: Outcome<Value>.self) { group in
            group.addTask { .finished(try await operation()) }
            group.addTask {
                try await Task.sleep(for: limit)
                return .expired
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
        switch outcome {
        case .finished(let value):
            return value
        case .expired:
            throw TrellisError.timedOut(TimeoutFailure(timeout: limit, request: "\(request.method) \(RequestLog.redactedURL(request))"))
        }
    }
}
