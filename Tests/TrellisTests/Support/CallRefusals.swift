import Trellis

/// The refusal `client` answers `request` with, or an error when the call was not refused.
func refusalOf(_ client: Client, _ request: Request) async throws -> CallRefusal {
    do {
        _ = try await client.data(for: request)
    } catch TrellisError.callRefused(let refusal) {
        return refusal
    }
    throw CallNotRefused()
}

/// A call a test expected a policy to refuse went out, or failed otherwise.
struct CallNotRefused: Error, CustomStringConvertible {
    var description: String { "the call was not refused" }
}
