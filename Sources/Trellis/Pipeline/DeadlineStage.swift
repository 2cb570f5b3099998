import NIOCore

/// Holds a buffered call's hop to the attempt's deadline, closest to the wire: the response
/// head and the whole body must arrive by then, or the hop is cancelled (closing its
/// connection) and fails with ``TrellisError/timedOut(_:)``. Redirects and token replays of one
/// attempt share its deadline, each getting what is left of it.
///
/// The hop runs in a task of its own (see ``Deadline``); keeping that task to the transport
/// alone, rather than the whole attempt, keeps its stack shallow, which is what a task's
/// allocations grow with (measured in `Benchmarks/`).
struct DeadlineStage: OptionalStage {
    /// The transport, when it can hold some buffered calls to their deadline itself.
    let transport: (any DeadlineEnforcingTransport)?

    func isNeeded(for request: Request) -> Bool {
        request.bufferLimit != nil && request.deadline != nil && transport?.enforcesDeadline(for: request) != true
    }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        guard let bufferLimit = request.bufferLimit, let deadline = request.deadline else { return try await next(request) }
        let remaining = deadline - .now
        guard remaining > .zero else {
            throw TrellisError.timedOut(TimeoutFailure(timeout: request.timeout ?? .zero, request: RequestLog.summary(request)))
        }
        return try await withoutActuallyEscaping(next) { next in
            // Deadline.run awaits the operation before it returns, so `next` does not outlive
            // this call.
            try await Deadline.run(remaining, reporting: request.timeout, describing: request) {
                let response = try await next(request)
                return response.withBody(ResponseBody(try await Self.collect(response.body, upTo: bufferLimit)))
            }
        }
    }

    /// The body in memory. A connection that breaks now had sent part of a response: it is
    /// not the stale connection a replay is for.
    private static func collect(_ body: ResponseBody, upTo limit: Int) async throws -> ByteBuffer {
        do {
            return try await body.collect(upTo: limit)
        } catch TrellisError.connectionFailed(var failure) where failure.mayBeStaleConnection {
            failure.mayBeStaleConnection = false
            throw TrellisError.connectionFailed(failure)
        }
    }
}

/// A transport that holds some buffered calls to their deadline, body included, by itself,
/// more cheaply than a task that watches the time.
protocol DeadlineEnforcingTransport: Sendable {
    func enforcesDeadline(for request: Request) -> Bool
}
