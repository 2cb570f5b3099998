#if canImport(Security)
public import Foundation
import Security

/// Keeps tokens in the Keychain as generic passwords: the storage for apps on Apple platforms.
///
/// Each label is an account of the given Keychain service. Items are readable only while the
/// device is unlocked after its first unlock, and never migrate to another device.
public final class KeychainAccessTokenStorage: AccessTokenStorage {
    /// The Keychain service the items belong to; defaults to the bundle identifier.
    public let service: String
    /// A Keychain access group to share tokens between apps of a team, if any.
    public let accessGroup: String?

    /// A storage in the Keychain service `service`.
    public init(service: String = Bundle.main.bundleIdentifier ?? "Trellis", accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    private func query(for label: String) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: label,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }

    public func store(_ token: AccessToken, for label: String) async throws {
        let data = try JSONEncoder().encode(token)
        let attributes: [String: Any] = [
            kSecValueData as String: data,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        var status = SecItemUpdate(query(for: label) as CFDictionary, attributes as CFDictionary)
        if status == errSecItemNotFound {
            status = SecItemAdd(query(for: label).merging(attributes) { $1 } as CFDictionary, nil)
        }
        try check(status, "storing \(label)")
    }

    public func fetch(for label: String) async throws -> AccessToken? {
        var query = query(for: label)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: AnyObject?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        try check(status, "reading \(label)")
        guard let data = result as? Data else { return nil }
        do {
            return try JSONDecoder().decode(AccessToken.self, from: data)
        } catch {
            throw AccessTokenStorageError(location: "Keychain service \(service)", reason: "the item \(label) is not a token Trellis wrote: \(error)")
        }
    }

    public func delete(for label: String) async throws {
        let status = SecItemDelete(query(for: label) as CFDictionary)
        if status == errSecItemNotFound { return }
        try check(status, "deleting \(label)")
    }

    private func check(_ status: OSStatus, _ action: String) throws {
        guard status != errSecSuccess else { return }
        let message = SecCopyErrorMessageString(status, nil).map { $0 as String } ?? "OSStatus \(status)"
        throw AccessTokenStorageError(location: "Keychain service \(service)", reason: "\(action) failed: \(message)")
    }
}
#endif
