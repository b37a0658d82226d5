import Foundation
import Logging
import TGPostgres

/// What one key rotation re-encrypted.
public struct KeyRotationReport: Sendable, Equatable, CustomStringConvertible {
    public var grants = 0
    public var accessTokens = 0
    public var pendingLogins = 0
    /// Rows still under an older key afterwards (in use during every batch): run it again.
    public var remaining = 0

    public init() {}

    public var description: String {
        "upstream_grants=\(grants) upstream_access_tokens=\(accessTokens) pending_logins=\(pendingLogins) remaining=\(remaining)"
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
        while true {
            let count = try await database.withTransaction { connection in
                let rows = try await connection.query(
                    """
                    SELECT account_id, refresh_token, id_token_hint FROM upstream_grants
                    WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """
                )
                for row in rows.rows {
                    let account = try row.decode(UUID.self, "account_id")
                    let token = try row.decode(PostgresBytes.self, "refresh_token")
                    let sealedToken = try vault.reseal(token, context: TokenVault.Context.grant(account)) ?? token
                    var hint = try row.decode(PostgresBytes?.self, "id_token_hint")
                    if let old = hint { hint = try vault.reseal(old, context: TokenVault.Context.idToken(account)) ?? old }
                    try await connection.query(
                        """
                        UPDATE upstream_grants SET refresh_token = \(sealedToken), id_token_hint = \(hint), key_id = \(current)
                        WHERE account_id = \(account)
                        """
                    )
                }
                return rows.count
            }
            report.grants += count
            if count < limit { break }
        }
        while true {
            let count = try await database.withTransaction { connection in
                let rows = try await connection.query(
                    """
                    SELECT account_id, scope_key, access_token FROM upstream_access_tokens
                    WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """
                )
                for row in rows.rows {
                    let account = try row.decode(UUID.self, "account_id")
                    let scopeKey = try row.decode(String.self, "scope_key")
                    let token = try row.decode(PostgresBytes.self, "access_token")
                    let context = TokenVault.Context.accessToken(account, scopeKey: scopeKey)
                    try await connection.query(
                        """
                        UPDATE upstream_access_tokens SET access_token = \(try vault.reseal(token, context: context) ?? token),
                          key_id = \(current) WHERE account_id = \(account) AND scope_key = \(scopeKey)
                        """
                    )
                }
                return rows.count
            }
            report.accessTokens += count
            if count < limit { break }
        }
        while true {
            let count = try await database.withTransaction { connection in
                let rows = try await connection.query(
                    """
                    SELECT state_hash, code_verifier FROM pending_logins
                    WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """
                )
                for row in rows.rows {
                    let stateHash = try row.decode(PostgresBytes.self, "state_hash")
                    let verifier = try row.decode(PostgresBytes.self, "code_verifier")
                    let context = TokenVault.Context.pendingLogin(stateHash)
                    try await connection.query(
                        """
                        UPDATE pending_logins SET code_verifier = \(try vault.reseal(verifier, context: context) ?? verifier),
                          key_id = \(current) WHERE state_hash = \(stateHash)
                        """
                    )
                }
                return rows.count
            }
            report.pendingLogins += count
            if count < limit { break }
        }
        let left = try await database.query(
            """
            SELECT (SELECT count(*) FROM upstream_grants WHERE key_id <> \(current))
              + (SELECT count(*) FROM upstream_access_tokens WHERE key_id <> \(current))
              + (SELECT count(*) FROM pending_logins WHERE key_id <> \(current)) AS remaining
            """
        )
        report.remaining = try left.first?.decode(Int.self, "remaining") ?? 0
        logger.info("keys rotated", metadata: ["current_key_id": .string(current), "reencrypted": .string(report.description)])
        return report
    }
}
