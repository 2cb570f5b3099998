public import Foundation

/// An access token as Trellis stores and sends it: `Authorization: <tokenType> <accessToken>`.
///
/// Servers shape their token responses differently; conform the server's model to
/// ``AccessTokenConvertible`` and Trellis converts it to this.
public struct AccessToken: Codable, Sendable, Hashable {
    /// The token sent with each protected request.
    public var accessToken: String
    /// The token the refresh hook exchanges for a new access token, when the server issued one.
    public var refreshToken: String?
    /// The scheme in the `Authorization` header; `Bearer` unless the server says otherwise.
    public var tokenType: String
    /// When the access token stops being accepted, when known. Trellis refreshes ahead of
    /// this time instead of waiting for a 401.
    public var expiresAt: Date?

    /// A token with an absolute expiry.
    public init(accessToken: String, refreshToken: String? = nil, tokenType: String = "Bearer", expiresAt: Date? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
    }

    /// A token that expires `expiresIn` seconds from now, as OAuth 2.0's `expires_in` says.
    public init(accessToken: String, refreshToken: String? = nil, tokenType: String = "Bearer", expiresIn: TimeInterval) {
        self.init(accessToken: accessToken, refreshToken: refreshToken, tokenType: tokenType, expiresAt: Date(timeIntervalSinceNow: expiresIn))
    }

    /// The value of the `Authorization` header. OAuth servers answer `bearer` in any case;
    /// RFC 6750 spells the scheme `Bearer`, which some servers insist on.
    public var authorizationValue: String {
        let scheme = tokenType.isEmpty || tokenType.lowercased() == "bearer" ? "Bearer" : tokenType
        return "\(scheme) \(accessToken)"
    }

    /// Whether the token has expired, or will within `leeway`, at `now`.
    public func isExpired(at now: Date = Date(), leeway: Duration = .zero) -> Bool {
        guard let expiresAt else { return false }
        let seconds = Double(leeway.components.seconds) + Double(leeway.components.attoseconds) / 1e18
        return expiresAt.timeIntervalSince(now) <= seconds
    }
}

/// A server's token model that Trellis can store: any `Codable` type that can say which
/// ``AccessToken`` it carries.
///
/// An endpoint returning a conforming type stores the converted token under its service's
/// label as soon as it is decoded, so a `login` endpoint logs the user in.
///
/// ```swift
/// struct OAuthToken: AccessTokenConvertible {
///     let access_token: String
///     let refresh_token: String?
///     let expires_in: Double
///
///     func convert() -> AccessToken? {
///         AccessToken(accessToken: access_token, refreshToken: refresh_token, expiresIn: expires_in)
///     }
/// }
/// ```
public protocol AccessTokenConvertible: Codable {
    /// The token to store, or `nil` when this response carries none.
    func convert() -> AccessToken?
}

extension AccessToken {
    private enum CodingKeys: String, CodingKey {
        case accessToken, refreshToken, tokenType, expiresAt
        case oauthAccessToken = "access_token", oauthRefreshToken = "refresh_token"
        case oauthTokenType = "token_type", oauthExpiresIn = "expires_in"
    }

    /// Decodes Trellis's own form (`accessToken`, `expiresAt`) or an OAuth 2.0 token response
    /// (`access_token`, `refresh_token`, `token_type`, `expires_in`, RFC 6749 section 5.1), so
    /// an endpoint can return `AccessToken` straight from a standard token endpoint.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if container.contains(.oauthAccessToken) {
            accessToken = try container.decode(String.self, forKey: .oauthAccessToken)
            refreshToken = try container.decodeIfPresent(String.self, forKey: .oauthRefreshToken)
            tokenType = try container.decodeIfPresent(String.self, forKey: .oauthTokenType) ?? "Bearer"
            expiresAt = try container.decodeIfPresent(Double.self, forKey: .oauthExpiresIn).map { Date(timeIntervalSinceNow: $0) }
        } else {
            accessToken = try container.decode(String.self, forKey: .accessToken)
            refreshToken = try container.decodeIfPresent(String.self, forKey: .refreshToken)
            tokenType = try container.decodeIfPresent(String.self, forKey: .tokenType) ?? "Bearer"
            expiresAt = try container.decodeIfPresent(Date.self, forKey: .expiresAt)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(accessToken, forKey: .accessToken)
        try container.encodeIfPresent(refreshToken, forKey: .refreshToken)
        try container.encode(tokenType, forKey: .tokenType)
        try container.encodeIfPresent(expiresAt, forKey: .expiresAt)
    }
}

extension AccessToken: AccessTokenConvertible {
    public func convert() -> AccessToken? { self }
}
