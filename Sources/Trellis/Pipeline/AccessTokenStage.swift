import NIOConcurrencyHelpers

/// Adds the access token to a request that requires one, on every hop, for the client's
/// origin alone, and refreshes and replays once when the server refuses the token.
struct AccessTokenStage: Stage {
    let authorizer: AccessTokenAuthorizer
    /// The client whose pipeline this is, handed to a ``TokenRefresher``; held weakly, since
    /// the client holds the pipeline.
    let client: ClientReference

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        request.accessToken != nil
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        guard let client = client.client else { return try await next(request, call) }
        guard authorizer.sharesItsStorage else {
            return try await authorizer.send(request, client: client, observation: call.observation) { try await next($0, call) }
        }
        // A storage a fleet shares waits for another process's refresh as long as the attempt
        // allows, and holds its time limits on the client's clock; no other storage reads them.
        return try await CallDeadline.$current.withValue(call.limits?.deadline) {
            try await SharedStateClock.$current.withValue(client.configuration.clock) {
                try await authorizer.send(request, client: client, observation: call.observation) { try await next($0, call) }
            }
        }
    }
}

/// A weak reference to a ``Client``, set once the client is made.
final class ClientReference: Sendable {
    private struct Weak {
        weak var client: Client?
    }

    private let box = NIOLockedValueBox(Weak())

    var client: Client? {
        get { box.withLockedValue { $0.client } }
        set { box.withLockedValue { $0.client = newValue } }
    }
}
