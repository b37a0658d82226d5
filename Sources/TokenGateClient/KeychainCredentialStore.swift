#if canImport(Security)
public import Foundation
import Security

/// A ``CredentialStore`` in the Keychain: generic passwords of one service, readable after the
/// first unlock and never leaving this device (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`:
/// no backup, no migration; a transfer code is the way back, docs/apps.md).
public struct KeychainCredentialStore: CredentialStore {
    public let service: String
    /// A keychain access group shared with the app's extensions, or nil for the app's own.
    public let accessGroup: String?

    public init(service: String = "TokenGateClient", accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    private func query(_ key: String) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: key,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }

    public func data(for key: String) throws -> Data? {
        var query = query(key)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw KeychainError(status: status) }
        return result as? Data
    }

    public func set(_ data: Data, for key: String) throws {
        let attributes: [String: Any] = [
            kSecValueData as String: data,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        let status = SecItemUpdate(query(key) as CFDictionary, attributes as CFDictionary)
        if status == errSecItemNotFound {
            let added = query(key).merging(attributes) { _, new in new }
            let status = SecItemAdd(added as CFDictionary, nil)
            guard status == errSecSuccess else { throw KeychainError(status: status) }
        } else if status != errSecSuccess {
            throw KeychainError(status: status)
        }
    }

    public func remove(_ key: String) throws {
        let status = SecItemDelete(query(key) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError(status: status) }
    }
}

/// A Keychain call's failure, with its `OSStatus`.
public struct KeychainError: Error, Sendable, Equatable {
    public let status: OSStatus
}
#endif
