import Foundation

/// Obtains a new access token for a client when the stored one is missing, expired or refused.
///
/// A service's `onAuthRetry` takes precedence over the client's refresher for that service's
/// requests. Trellis calls the refresher once per label however many requests are waiting,
/// and stores what it returns.
///
/// ```swift
/// struct Refresher: TokenRefresher {
///     func refreshToken(_ current: AccessToken?, label: String, client: Client) async throws -> any AccessTokenConvertible {
///         guard let refreshToken = current?.refreshToken else {
///             throw TrellisError.authenticationRequired(.init(label: label, reason: "log in first"))
///         }
///         let auth = AuthService(client: client)
///         return try await auth.refresh(grant: .init(refreshToken: refreshToken))
///     }
/// }
/// ```
public protocol TokenRefresher: Sendable {
    /// Returns a new token for `label`. `current` is the stored token (expired or refused), or
    /// `nil` when none is stored.
    ///
    /// Throw ``TrellisError/authenticationRequired(_:)``, or let a 400, 401 or 403 from the
    /// token endpoint through, when the user must log in again: the stored token is deleted and
    /// every waiting request fails with ``TrellisError/authenticationRequired(_:)``. Any other
    /// error (a network failure) keeps the token and reaches the waiting requests as it is.
    func refreshToken(_ current: AccessToken?, label: String, client: Client) async throws -> any AccessTokenConvertible
}

/// How a client stores, sends and refreshes access tokens.
public struct AccessTokenSettings: Sendable {
    /// Where tokens are kept; in memory by default.
    public var storage: any AccessTokenStorage
    /// Obtains new tokens for requests of services without their own `onAuthRetry`.
    public var refresher: (any TokenRefresher)?
    /// The response statuses that mean "this token is no longer accepted" and start a refresh
    /// and a replay. Snowdrop calls this `accessTokenErrorCodes`.
    public var refreshStatuses: Set<Int>
    /// How long before its expiry a token is treated as expired and refreshed before sending,
    /// so a request does not leave with a token that expires on its way.
    ///
    /// Keep it well below the life of the tokens your server issues: a token that lives less
    /// than the leeway is expired as soon as it arrives, so every call refreshes it again, one
    /// after another (and, with a storage a fleet shares, each under the fleet's lock). For
    /// tokens that live a minute, a leeway of a few seconds.
    public var expiryLeeway: Duration

    /// Creates the settings.
    public init(
        storage: any AccessTokenStorage = InMemoryAccessTokenStorage(),
        refresher: (any TokenRefresher)? = nil,
        refreshStatuses: Set<Int> = [401],
        expiryLeeway: Duration = .seconds(30)
    ) {
        self.storage = storage
        self.refresher = refresher
        self.refreshStatuses = refreshStatuses
        self.expiryLeeway = expiryLeeway
    }
}

/// What a request needs to carry an access token: the label it is stored under, and the hook
/// that refreshes it when the request's service has one.
public struct AccessTokenRequirement: Sendable {
    /// The label a token is stored under when none is given: by a service without
    /// `@TokenLabel`, and by ``Request/requireAccessToken(label:)``.
    public static let defaultLabel = "TrellisToken"

    /// Obtains a new token given the current one (or `nil`).
    public typealias Refresh = @Sendable (_ current: AccessToken?) async throws -> any AccessTokenConvertible

    /// The storage label.
    public var label: String
    /// Overrides the client's ``TokenRefresher`` for this request.
    public var refresh: Refresh?

    /// Requires the token stored under `label`.
    public init(label: String, refresh: Refresh? = nil) {
        self.label = label
        self.refresh = refresh
    }
}

extension Request {
    /// Marks the request as needing the access token stored under `label`.
    public mutating func requireAccessToken(label: String = AccessTokenRequirement.defaultLabel) {
        accessToken = AccessTokenRequirement(label: label)
    }
}
