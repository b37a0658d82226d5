public import Foundation

/// A transfer code and the verifier it was bound to (``TokenGateClient/prepareTransferCode(account:)``).
public struct TransferCode: Sendable, Codable, Equatable {
    public let code: String
    public let verifier: String
    public let expiresAt: Date

    enum CodingKeys: String, CodingKey {
        case code, verifier
        case expiresAt = "expires_at"
    }
}

/// Where a transfer code is kept: somewhere that survives what the credential store does not (an
/// app moved to another developer team, a phone restored without its Keychain). On iOS that is a
/// file in Application Support with `.completeFileProtection`, not excluded from backup
/// (``FileTransferStore``): less protected than the Keychain — it travels in backups, bound to
/// no device — which is why a code works once, only with its verifier, only for this app and only
/// while the old sessions are live (docs/apps.md).
public protocol TransferStore: Sendable {
    func load() throws -> TransferCode?
    func save(_ code: TransferCode) throws
    func remove() throws
}

/// A ``TransferStore`` in one JSON file, replaced whole on every save. On iOS, give it a URL in
/// Application Support; it sets `.completeFileProtection` there.
public final class FileTransferStore: TransferStore {
    let file: URL

    public init(file: URL) {
        self.file = file
    }

    public func load() throws -> TransferCode? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        return try JSONDecoder().decode(TransferCode.self, from: Data(contentsOf: file))
    }

    public func save(_ code: TransferCode) throws {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        var options: Data.WritingOptions = [.atomic]
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        options.insert(.completeFileProtection)
        #endif
        try JSONEncoder().encode(code).write(to: file, options: options)
    }

    public func remove() throws {
        if FileManager.default.fileExists(atPath: file.path) { try FileManager.default.removeItem(at: file) }
    }
}
