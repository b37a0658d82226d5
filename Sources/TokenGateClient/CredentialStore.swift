public import Foundation
import Synchronization

/// Where the library keeps what must survive a restart and stay on this device: the refresh
/// tokens, the device secret, the DPoP key of a software key. One item per key; a `set` replaces
/// the item whole, so what is read back is always one complete write.
///
/// On Apple's systems use ``KeychainCredentialStore`` (this device only, after first unlock);
/// elsewhere ``FileCredentialStore``; ``InMemoryCredentialStore`` for tests and previews.
public protocol CredentialStore: Sendable {
    func data(for key: String) throws -> Data?
    func set(_ data: Data, for key: String) throws
    func remove(_ key: String) throws
}

/// A ``CredentialStore`` in memory: gone with the process (tests; an app's previews).
public final class InMemoryCredentialStore: CredentialStore {
    private let items = Mutex<[String: Data]>([:])

    public init() {}

    public func data(for key: String) -> Data? { items.withLock { $0[key] } }

    public func set(_ data: Data, for key: String) { items.withLock { $0[key] = data } }

    public func remove(_ key: String) { _ = items.withLock { $0.removeValue(forKey: key) } }

    /// Forgets everything, as a lost Keychain does.
    public func removeAll() { items.withLock { $0.removeAll() } }
}

/// A ``CredentialStore`` in a directory, one file per key, readable by the owner only, each
/// written to a temporary file and renamed over the old one (a crash leaves the old or the new
/// item, never half of one). For platforms without a Keychain.
public final class FileCredentialStore: CredentialStore {
    let directory: URL

    /// `directory` is created (mode 0700) when missing.
    public init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    public func data(for key: String) throws -> Data? {
        let url = file(key)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try Data(contentsOf: url)
    }

    public func set(_ data: Data, for key: String) throws {
        let url = file(key)
        let temporary = directory.appendingPathComponent(".\(UUID().uuidString).tmp")
        guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown)
        }
        if rename(temporary.path, url.path) != 0 {
            try? FileManager.default.removeItem(at: temporary)
            throw CocoaError(.fileWriteUnknown)
        }
    }

    public func remove(_ key: String) throws {
        let url = file(key)
        if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
    }

    /// A key as a file name: its base64url, so no key reaches outside the directory.
    private func file(_ key: String) -> URL {
        directory.appendingPathComponent("item-" + Base64URL.encode(key))
    }
}
