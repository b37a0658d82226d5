import Foundation
public import Logging
public import TGStore

/// What one key rotation re-encrypted.
public struct KeyRotationReport: Sendable, Equatable, CustomStringConvertible {
    public var grants = 0
    public var accessTokens = 0
    public var pendingLogins = 0
    public var queuedRevocations = 0
    /// Rows still under an older key afterwards (in use during every batch): run it again.
    public var remaining = 0

    public init() {}

    public var description: String {
        "upstream_grants=\(grants) upstream_access_tokens=\(accessTokens) pending_logins=\(pendingLogins) "
            + "upstream_revocations=\(queuedRevocations) remaining=\(remaining)"
    }
}

/// Re-encrypts every secret at rest under the vault's current key (`tokengate keys rotate`).
public final class KeyRotation: Sendable {
    let store: Store
    let vault: TokenVault
    /// Rows per short transaction.
    let batchSize: Int
    let logger: Logger

    public init(store: Store, vault: TokenVault, batchSize: Int = AuthSettings().batchSize, logger: Logger) {
        self.store = store
        self.vault = vault
        self.batchSize = batchSize
        self.logger = logger
    }

    /// The key id secrets are sealed under now.
    public var currentKeyID: String { vault.currentKeyID }

    /// Re-encrypts every secret at rest under the current key, in batches of short transactions
    /// (rows in use are skipped and picked up by the next batch), so it runs while TokenGate
    /// serves and logs nobody out. Old keys must stay configured until it has finished.
    public func rotateKeys() async throws -> KeyRotationReport {
        var report = KeyRotationReport()
        let current = vault.currentKeyID
        let limit = batchSize
        let vault = vault
        report.grants = try await inBatches { keys in
            try await keys.resealGrants(notUnder: current, limit: limit) { account, token, hint in
                let resealedHint = try hint.map { old in try vault.reseal(old, context: TokenVault.Context.idToken(account)) ?? old }
                return (try vault.reseal(token, context: TokenVault.Context.grant(account)) ?? token, resealedHint)
            }
        }
        report.accessTokens = try await inBatches { keys in
            try await keys.resealAccessTokens(notUnder: current, limit: limit) { account, scopeKey, token in
                try vault.reseal(token, context: TokenVault.Context.accessToken(account, scopeKey: scopeKey)) ?? token
            }
        }
        report.pendingLogins = try await inBatches { keys in
            try await keys.resealPendingLogins(notUnder: current, limit: limit) { stateHash, verifier in
                try vault.reseal(verifier, context: TokenVault.Context.pendingLogin(stateHash)) ?? verifier
            }
        }
        report.queuedRevocations = try await inBatches { keys in
            try await keys.resealQueuedRevocations(notUnder: current, limit: limit) { account, token in
                try vault.reseal(token, context: TokenVault.Context.grant(account)) ?? token
            }
        }
        report.remaining = try await store.keys.remaining(notUnder: current)
        logger.info("keys rotated", metadata: ["current_key_id": .string(current), "reencrypted": .string(report.description)])
        return report
    }

    /// Runs `batch` in one short transaction at a time until a batch comes back short. Returns
    /// the rows re-encrypted.
    private func inBatches(_ batch: (KeyStore) async throws -> Int) async throws -> Int {
        var total = 0
        while true {
            let count = try await store.transaction { try await batch($0.keys) }
            total += count
            if count < batchSize { return total }
        }
    }
}
