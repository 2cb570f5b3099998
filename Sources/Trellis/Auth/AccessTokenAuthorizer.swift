import Foundation
import HTTPTypes
import NIOConcurrencyHelpers

/// Adds access tokens to requests and refreshes them, once per label however many requests
/// are waiting. One per client.
final class AccessTokenAuthorizer: Sendable {
    let settings: AccessTokenSettings
    /// Whether the storage is one a fleet shares, which reads the call's deadline and clock.
    let sharesItsStorage: Bool
    private let origin: String?
    private let refreshes = NIOLockedValueBox(Refreshes())

    private struct Refreshes {
        var lastID: UInt64 = 0
        var running: [String: (id: UInt64, task: Task<AccessToken, any Error>)] = [:]
    }

    /// The label whose refresh the current task is running, so that a request the refresh
    /// hook makes (a token endpoint that itself needs the token) does not wait for itself.
    @TaskLocal static var refreshingLabel: String?

    init(settings: AccessTokenSettings, base: BaseURL?) {
        self.settings = settings
        sharesItsStorage = settings.storage is any SharedAccessTokenStorage
        self.origin = base.map { Request.origin(scheme: $0.scheme, authority: $0.authority) }
    }

    /// Sends `request` with its token and, when the server refuses the token, replays it once
    /// with a refreshed one.
    ///
    /// A storage that fails (a file that cannot be read, a fleet's lock that cannot be taken)
    /// fails the call as every other failure of a call does, with a ``TrellisError``:
    /// ``TrellisError/authenticationRequired(_:)``, whose underlying error is the storage's
    /// ``AccessTokenStorageError``.
    func send(
        _ request: Request,
        client: Client,
        observation: CallObservation?,
        next: (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        guard let requirement = request.accessToken else { return try await next(request) }
        do {
            return try await send(request, requiring: requirement, client: client, observation: observation, next: next)
        } catch let failure as AccessTokenStorageError {
            throw TrellisError.authenticationRequired(AuthenticationFailure(
                label: requirement.label, reason: "the access token storage failed: \(failure)", underlying: failure
            ))
        }
    }

    private func send(
        _ request: Request,
        requiring requirement: AccessTokenRequirement,
        client: Client,
        observation: CallObservation?,
        next: (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        // A token is a credential for the service's origin alone: a request for another
        // origin never carries one, whatever the code that built it asked for.
        guard let origin, request.origin == origin else {
            return try await next(request)
        }
        let label = requirement.label
        let refresh = requirement.refresh ?? settings.refresher.map { refresher in
            { @Sendable current in try await refresher.refreshToken(current, label: label, client: client) }
        }
        if Self.refreshingLabel == label {
            let token = try await settings.storage.fetch(for: label)
            return try await next(Self.authorized(request, with: token))
        }

        var token = try await settings.storage.fetch(for: label)
        let usable = token.map { !$0.isExpired(leeway: settings.expiryLeeway) } ?? false
        if !usable {
            if let refresh {
                token = try await refreshed(label, replacing: token, using: refresh)
                observation?.accessTokenRefreshed(label: label, for: request)
            } else if token == nil {
                throw TrellisError.authenticationRequired(
                    AuthenticationFailure(label: label, reason: "no access token is stored and no refresh hook is set to obtain one")
                )
            }
        }
        let response = try await next(Self.authorized(request, with: token))
        guard settings.refreshStatuses.contains(response.status.code), let refresh else { return response }
        await response.body.discard()
        if let body = request.body, !body.isReplayable {
            throw TrellisError.invalidRequest(InvalidRequest(
                .body,
                "the server refused the access token (\(response.status.code)) and the request's body is a one-shot stream that cannot be sent again with a new token; send data or a file instead"
            ))
        }
        let fresh = try await refreshed(label, replacing: token, using: refresh)
        observation?.accessTokenRefreshed(label: label, for: request)
        return try await next(Self.authorized(request, with: fresh))
    }

    /// The stored token after a refresh that replaces `stale`: one refresh per label runs at a
    /// time and every caller meanwhile shares its result; a caller whose stale token has
    /// already been replaced gets the stored one without another refresh.
    func refreshed(
        _ label: String,
        replacing stale: AccessToken?,
        using refresh: @escaping AccessTokenRequirement.Refresh
    ) async throws -> AccessToken {
        let task = refreshes.withLockedValue { state in
            if let running = state.running[label] { return running.task }
            state.lastID += 1
            let id = state.lastID
            let task = Task {
                defer { self.finished(label, id) }
                return try await self.performRefresh(label, replacing: stale, using: refresh)
            }
            state.running[label] = (id, task)
            return task
        }
        return try await task.value
    }

    private func finished(_ label: String, _ id: UInt64) {
        refreshes.withLockedValue { state in
            if state.running[label]?.id == id { state.running[label] = nil }
        }
    }

    private func performRefresh(
        _ label: String,
        replacing stale: AccessToken?,
        using refresh: @escaping AccessTokenRequirement.Refresh
    ) async throws -> AccessToken {
        do {
            // A fleet's storage runs the refresh under its lock, with the token stored when the
            // lock was taken, and stores the new one itself.
            if let shared = settings.storage as? any SharedAccessTokenStorage {
                return try await shared.refreshOnce(label) { stored in
                    try await self.token(label, stored: stored, replacing: stale, using: refresh)
                }
            }
            let stored = try await settings.storage.fetch(for: label)
            let token = try await token(label, stored: stored, replacing: stale, using: refresh)
            if token != stored { try await settings.storage.store(token, for: label) }
            return token
        } catch let error where isRefusal(error) {
            try? await settings.storage.delete(for: label)
            if case TrellisError.authenticationRequired = error { throw error }
            throw TrellisError.authenticationRequired(
                AuthenticationFailure(label: label, reason: "the token refresh was refused, so the stored token was deleted", underlying: error)
            )
        }
    }

    /// `stored` when it has replaced `stale` and has not expired (another caller refreshed
    /// first); otherwise a new token from `refresh`.
    private func token(
        _ label: String,
        stored: AccessToken?,
        replacing stale: AccessToken?,
        using refresh: AccessTokenRequirement.Refresh
    ) async throws -> AccessToken {
        if let stored, stored.accessToken != stale?.accessToken, !stored.isExpired(leeway: settings.expiryLeeway) {
            return stored
        }
        let converted = try await Self.$refreshingLabel.withValue(label) {
            try await refresh(stored ?? stale)
        }
        guard let token = converted.convert() else {
            throw TrellisError.authenticationRequired(AuthenticationFailure(label: label, reason: "the refresh hook returned no token"))
        }
        return token
    }

    /// Whether a refresh failed because the credentials are no good (log in again), as
    /// opposed to a failure worth trying again later.
    private func isRefusal(_ error: any Error) -> Bool {
        switch error as? TrellisError {
        case .authenticationRequired: true
        case .unacceptableStatus(let failure):
            [400, 401, 403].contains(failure.status.code) || settings.refreshStatuses.contains(failure.status.code)
        default: false
        }
    }

    static func authorized(_ request: Request, with token: AccessToken?) -> Request {
        guard let token else { return request }
        var request = request
        request.headerFields[.authorization] = token.authorizationValue
        return request
    }
}
