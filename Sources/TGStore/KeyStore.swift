public import Foundation
import TGPostgres

/// Every secret at rest by the key that sealed it, for key rotation: each batch locks rows
/// sealed under another key than the current one (skipping rows in use), seals them again and
/// names the current key. Run a batch inside a transaction (``Store/transaction(_:)``), so the
/// rows stay locked until it commits.
public struct KeyStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// Grants: the refresh token and the ID token hint of each account. `reseal` gets
    /// (account, refresh token, hint) and gives them back under the current key.
    public func resealGrants(
        notUnder current: String,
        limit: Int,
        _ reseal: (UUID, SealedBlob, SealedBlob?) throws -> (SealedBlob, SealedBlob?)
    ) async throws -> Int {
        let rows = try await executor.query(
            """
            SELECT account_id, refresh_token, id_token_hint FROM upstream_grants
            WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        )
        for row in rows.rows {
            let account = try row.value(UUID.self, "account_id")
            let (token, hint) = try reseal(
                account,
                try row.value(SealedBlob.self, "refresh_token"),
                try row.value(SealedBlob?.self, "id_token_hint")
            )
            try await executor.query(
                "UPDATE upstream_grants SET key_id = \(current), id_token_hint = \(hint), refresh_token = \(token) WHERE account_id = \(account)"
            )
        }
        return rows.count
    }

    /// Upstream access tokens; `reseal` gets (account, scope key, token).
    public func resealAccessTokens(
        notUnder current: String,
        limit: Int,
        _ reseal: (UUID, String, SealedBlob) throws -> SealedBlob
    ) async throws -> Int {
        let rows = try await executor.query(
            """
            SELECT account_id, scope_key, access_token FROM upstream_access_tokens
            WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        )
        for row in rows.rows {
            let account = try row.value(UUID.self, "account_id")
            let scopeKey = try row.value(String.self, "scope_key")
            let token = try reseal(account, scopeKey, try row.value(SealedBlob.self, "access_token"))
            try await executor.query(
                """
                UPDATE upstream_access_tokens SET access_token = \(token), key_id = \(current)
                WHERE account_id = \(account) AND scope_key = \(scopeKey)
                """
            )
        }
        return rows.count
    }

    /// Pending logins' PKCE verifiers; `reseal` gets (state hash, verifier).
    public func resealPendingLogins(notUnder current: String, limit: Int, _ reseal: (TokenHash, SealedBlob) throws -> SealedBlob) async throws -> Int
    {
        let rows = try await executor.query(
            """
            SELECT state_hash, code_verifier FROM pending_logins
            WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        )
        for row in rows.rows {
            let stateHash = try row.value(TokenHash.self, "state_hash")
            let verifier = try reseal(stateHash, try row.value(SealedBlob.self, "code_verifier"))
            try await executor.query("UPDATE pending_logins SET code_verifier = \(verifier), key_id = \(current) WHERE state_hash = \(stateHash)")
        }
        return rows.count
    }

    /// Queued revocations' refresh tokens; `reseal` gets (account, token).
    public func resealQueuedRevocations(notUnder current: String, limit: Int, _ reseal: (UUID, SealedBlob) throws -> SealedBlob) async throws -> Int {
        let rows = try await executor.query(
            """
            SELECT id, account_id, refresh_token FROM upstream_revocations
            WHERE key_id <> \(current) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        )
        for row in rows.rows {
            let id = try row.value(UUID.self, "id")
            let token = try reseal(try row.value(UUID.self, "account_id"), try row.value(SealedBlob.self, "refresh_token"))
            try await executor.query("UPDATE upstream_revocations SET refresh_token = \(token), key_id = \(current) WHERE id = \(id)")
        }
        return rows.count
    }

    /// How many secrets are still sealed under another key than `current`.
    public func remaining(notUnder current: String) async throws -> Int {
        let rows = try await executor.query(
            """
            SELECT (SELECT count(*) FROM upstream_grants WHERE key_id <> \(current))
              + (SELECT count(*) FROM upstream_revocations WHERE key_id <> \(current))
              + (SELECT count(*) FROM upstream_access_tokens WHERE key_id <> \(current))
              + (SELECT count(*) FROM pending_logins WHERE key_id <> \(current)) AS remaining
            """
        )
        return try rows.first?.value(Int.self, "remaining") ?? 0
    }
}
