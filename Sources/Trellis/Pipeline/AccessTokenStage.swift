import NIOConcurrencyHelpers

/// Adds the access token to a request that requires one, on every hop, for the client's
/// origin alone, and refreshes and replays once when the server refuses the token.
struct AccessTokenStage: OptionalStage {
    let authorizer: AccessTokenAuthorizer
    /// The client whose pipeline this is, handed to a ``TokenRefresher``; held weakly, since
    /// the client holds the pipeline.
    let client: ClientReference

    func isNeeded(for request: Request) -> Bool {
        request.accessToken != nil
    }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        guard request.accessToken != nil, let client = client.client else { return try await next(request) }
        return try await authorizer.send(request, client: client, next: next)
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
