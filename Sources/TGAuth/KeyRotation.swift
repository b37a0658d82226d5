import Foundation
import Logging
import TGPostgres
import TGStore

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

extension AuthService {
    /// Re-encrypts every secret at rest under the current key, in batches of short transactions
    /// (rows in use are skipped and picked up by the next batch), so it runs while TokenGate
    /// serves and logs nobody out. Old keys must stay configured until it has finished.
    public func rotateKeys() async throws -> KeyRotationReport {
        var report = KeyRotationReport()
        let current = vault.currentKeyID
        let limit = settings.batchSize
        report.grants = try await reencryptInBatches(
            """
            SELECT account_id, refresh_token, id_token_hint FROM upstream_grants
            WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        ) { row in
            let account = try row.decode(UUID.self, "account_id")
            let token = try row.decode(PostgresBytes.self, "refresh_token")
            var hint = try row.decode(PostgresBytes?.self, "id_token_hint")
            if let old = hint { hint = try self.vault.reseal(old, context: TokenVault.Context.idToken(account)) ?? old }
            return """
                UPDATE upstream_grants SET key_id = \(current), id_token_hint = \(hint),
                  refresh_token = \(try self.vault.reseal(token, context: TokenVault.Context.grant(account)) ?? token)
                WHERE account_id = \(account)
                """
        }
        report.accessTokens = try await reencryptInBatches(
            """
            SELECT account_id, scope_key, access_token FROM upstream_access_tokens
            WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        ) { row in
            let account = try row.decode(UUID.self, "account_id")
            let scopeKey = try row.decode(String.self, "scope_key")
            let token = try row.decode(PostgresBytes.self, "access_token")
            let context = TokenVault.Context.accessToken(account, scopeKey: scopeKey)
            return """
                UPDATE upstream_access_tokens SET access_token = \(try self.vault.reseal(token, context: context) ?? token),
                  key_id = \(current) WHERE account_id = \(account) AND scope_key = \(scopeKey)
                """
        }
        report.pendingLogins = try await reencryptInBatches(
            """
            SELECT state_hash, code_verifier FROM pending_logins
            WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        ) { row in
            let stateHash = try row.decode(TokenHash.self, "state_hash")
            let verifier = try row.decode(PostgresBytes.self, "code_verifier")
            let context = TokenVault.Context.pendingLogin(stateHash)
            return """
                UPDATE pending_logins SET code_verifier = \(try self.vault.reseal(verifier, context: context) ?? verifier),
                  key_id = \(current) WHERE state_hash = \(stateHash)
                """
        }
        report.queuedRevocations = try await reencryptInBatches(
            """
            SELECT id, account_id, refresh_token FROM upstream_revocations
            WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        ) { row in
            let id = try row.decode(UUID.self, "id")
            let token = try row.decode(PostgresBytes.self, "refresh_token")
            let context = TokenVault.Context.grant(try row.decode(UUID.self, "account_id"))
            return """
                UPDATE upstream_revocations SET refresh_token = \(try self.vault.reseal(token, context: context) ?? token),
                  key_id = \(current) WHERE id = \(id)
                """
        }
        let left = try await database.query(
            """
            SELECT (SELECT count(*) FROM upstream_grants WHERE key_id <> \(current))
              + (SELECT count(*) FROM upstream_revocations WHERE key_id <> \(current))
              + (SELECT count(*) FROM upstream_access_tokens WHERE key_id <> \(current))
              + (SELECT count(*) FROM pending_logins WHERE key_id <> \(current)) AS remaining
            """
        )
        report.remaining = try left.first?.decode(Int.self, "remaining") ?? 0
        logger.info("keys rotated", metadata: ["current_key_id": .string(current), "reencrypted": .string(report.description)])
        return report
    }

    /// Runs `select` (a batch of rows locked for update) and each row's `update` in one short
    /// transaction per batch, until a batch comes back short. Returns the rows updated.
    private func reencryptInBatches(
        _ select: PostgresQuery,
        _ update: @escaping (PostgresRow) throws -> PostgresQuery
    ) async throws -> Int {
        var total = 0
        while true {
            let count = try await database.withTransaction { connection in
                let rows = try await connection.query(select)
                for row in rows.rows { try await connection.query(try update(row)) }
                return rows.count
            }
            total += count
            if count < settings.batchSize { return total }
        }
    }
}
