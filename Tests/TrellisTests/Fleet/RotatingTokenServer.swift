#if Postgres
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// An authorization server that rotates refresh tokens as Auth0 and Okta do: each refresh
/// token is good once, and a second use of one revokes every token it ever issued (the
/// family), so that a fleet refreshing twice at once is logged out. Access tokens expire after
/// `lifetime`, and are still taken for `grace` beyond it, as by a server that allows for clocks
/// that disagree. `GET /me` answers 200 to a live access token and 401 otherwise.
final class RotatingTokenServer: Sendable {
    struct State {
        var issued = 0
        var liveAccess: [String: ContinuousClock.Instant] = [:]
        var liveRefresh: Set<String> = []
        var spentRefresh: Set<String> = []
        var refreshes = 0
        var reuses = 0
        var refused = 0
        var holdingRefreshes = false
        /// The access token issued last, and the callers (their `X-Worker`) answered with it.
        var newest: String?
        var answeredWithNewest: Set<String> = []
        /// How many times ``expireAccessTokens()`` was called.
        var expiries = 0
        var held: [CheckedContinuation<Bool, Never>] = []
    }

    let lifetime: Duration
    let grace: Duration
    let state = NIOLockedValueBox(State())
    /// Yields once for each refresh the server holds without answering (``holdRefreshes()``).
    let heldRefreshes: AsyncStream<Void>
    private let heldRefresh: AsyncStream<Void>.Continuation
    /// Yields, each time another caller (by its `X-Worker`) is answered with the access token
    /// issued last, how many have been; and -1 when a refresh token is used twice (which
    /// revokes every token: nobody will be answered again), or when the tokens were refreshed
    /// more often than ``expireAccessTokens()`` expired them.
    let answeredWithNewest: AsyncStream<Int>
    private let answeredNewest: AsyncStream<Int>.Continuation

    init(lifetime: Duration, grace: Duration = .zero) {
        self.lifetime = lifetime
        self.grace = grace
        (heldRefreshes, heldRefresh) = AsyncStream.makeStream()
        (answeredWithNewest, answeredNewest) = AsyncStream.makeStream()
    }

    var refreshes: Int { state.withLockedValue { $0.refreshes } }
    var reuses: Int { state.withLockedValue { $0.reuses } }
    var refused: Int { state.withLockedValue { $0.refused } }

    /// Issues the first pair of tokens, as a login would, in OAuth's JSON form.
    func login() -> (access: String, refresh: String) {
        state.withLockedValue { issue(&$0) }
    }

    /// Holds every refresh from now on without answering it (nor spending its refresh token)
    /// until ``releaseHeldRefreshes()``; ``answerRefreshes()`` answers new ones again.
    func holdRefreshes() { state.withLockedValue { $0.holdingRefreshes = true } }

    /// Answers the refreshes that come from now on; the held ones stay held.
    func answerRefreshes() { state.withLockedValue { $0.holdingRefreshes = false } }

    /// Answers the held refreshes with a 503, spending no refresh token.
    func releaseHeldRefreshes() {
        for refresh in takeHeld() { refresh.resume(returning: false) }
    }

    /// Answers the held refreshes as any other (a new pair for a live refresh token), and
    /// answers the refreshes that come from now on.
    func answerHeldRefreshes() {
        answerRefreshes()
        for refresh in takeHeld() { refresh.resume(returning: true) }
    }

    private func takeHeld() -> [CheckedContinuation<Bool, Never>] {
        state.withLockedValue { state in
            defer { state.held = [] }
            return state.held
        }
    }

    /// Takes back every access token issued so far, as their expiry would: the next call with
    /// one is answered 401. A test moves the tokens' time on this way, not by waiting.
    func expireAccessTokens() {
        state.withLockedValue { state in
            state.liveAccess = [:]
            state.expiries += 1
        }
    }

    private func issue(_ state: inout State) -> (access: String, refresh: String) {
        state.issued += 1
        let pair = (access: "access-\(state.issued)", refresh: "refresh-\(state.issued)")
        state.liveAccess[pair.access] = .now + lifetime + grace
        state.liveRefresh.insert(pair.refresh)
        state.newest = pair.access
        state.answeredWithNewest = []
        return pair
    }

    private static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    func install(_ router: Router<BasicRequestContext>) {
        router.post("oauth/refresh") { request, context in
            struct Grant: Decodable { var refresh_token: String }
            let grant = try await request.decode(as: Grant.self, context: context)
            if self.state.withLockedValue({ $0.holdingRefreshes }) {
                let answers = await withCheckedContinuation { continuation in
                    let holding = self.state.withLockedValue { state in
                        if state.holdingRefreshes { state.held.append(continuation) }
                        return state.holdingRefreshes
                    }
                    if holding { self.heldRefresh.yield() } else { continuation.resume(returning: true) }
                }
                if !answers { return Self.json(#"{"error":"temporarily_unavailable"}"#, status: .serviceUnavailable) }
            }
            let pair = self.state.withLockedValue { state -> (access: String, refresh: String)? in
                state.refreshes += 1
                // A test that expires the tokens itself allows one refresh per expiry.
                if state.expiries > 0, state.refreshes > state.expiries { self.answeredNewest.yield(-1) }
                if state.liveRefresh.remove(grant.refresh_token) != nil {
                    state.spentRefresh.insert(grant.refresh_token)
                    return self.issue(&state)
                }
                if state.spentRefresh.contains(grant.refresh_token) {
                    self.answeredNewest.yield(-1)
                    state.reuses += 1
                    state.liveAccess = [:]
                    state.liveRefresh = []
                }
                return nil
            }
            guard let pair else { return Self.json(#"{"error":"invalid_grant"}"#, status: .badRequest) }
            let seconds = Double(self.lifetime.components.seconds) + Double(self.lifetime.components.attoseconds) / 1e18
            return Self.json(#"{"access_token":"\#(pair.access)","refresh_token":"\#(pair.refresh)","token_type":"Bearer","expires_in":\#(seconds)}"#)
        }
        router.get("me") { request, _ in
            let token = request.headers[.authorization].map { String($0.dropFirst("Bearer ".count)) } ?? ""
            let worker = request.headers[HTTPField.Name("X-Worker")!] ?? ""
            let (live, onNewest) = self.state.withLockedValue { state -> (Bool, Int?) in
                guard let expiry = state.liveAccess[token], expiry > .now else {
                    state.refused += 1
                    return (false, nil)
                }
                guard token == state.newest, state.answeredWithNewest.insert(worker).inserted else { return (true, nil) }
                return (true, state.answeredWithNewest.count)
            }
            if let onNewest { self.answeredNewest.yield(onNewest) }
            return live ? Self.json(#"{"ok":true}"#) : Self.json(#"{"error":"invalid_token"}"#, status: .unauthorized)
        }
    }
}
#endif
