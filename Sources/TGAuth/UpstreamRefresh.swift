import Foundation
import Logging
import TGCrypto
import TGOIDC
import TGPostgres

/// What one refresh under the grant's row lock came to.
enum UpstreamRefreshOutcome {
    case token(UpstreamAccessToken)
    /// The provider rejected the grant (or it is gone): the account is stale, its sessions ended.
    case grantRejected
    /// The provider could not answer; the grant is untouched.
    case providerUnavailable(retryAfter: Int)
}

/// A provider's answer to a refresh, to be written: the grant (rotated or not) and the token.
struct UpstreamRotation: Sendable {
    var account: UUID
    /// The grant's version the refresh started from.
    var version: Int
    var refreshToken: String?
    var refreshTokenExpiresAt: Date?
    var idToken: String?
    var scopeKey: String
    var token: UpstreamAccessToken
}

extension AuthService {
    /// Holding the grant's row lock (so no other instance refreshes it meanwhile): use a token
    /// another holder stored while this one waited, else refresh once and write the result
    /// before anyone is answered. `onRotation` hears the provider's answer before it is written.
    func refreshUpstream(
        _ account: AccountSummary,
        scopes: [String],
        scopeKey: String,
        rejected: String?,
        now: Date,
        on connection: PostgresConnection,
        onRotation: (UpstreamRotation) -> Void
    ) async throws -> UpstreamRefreshOutcome {
        let rows = try await connection.query(
            """
            SELECT g.refresh_token, g.version, g.policy, a.state FROM upstream_grants g JOIN accounts a ON a.id = g.account_id
            WHERE g.account_id = \(account.id) FOR UPDATE OF g
            """
        )
        guard let row = rows.first, try row.decode(String.self, "state") == "active" else { return .grantRejected }
        if let stored = try await storedUpstreamToken(account.id, scopeKey: scopeKey, on: connection), stored.value != rejected,
            isFresh(stored, now: now)
        {
            return .token(stored)
        }
        guard let provider = providers[account.provider] else {
            logger.error("an account's provider is not configured any more", metadata: ["provider": .string(account.provider)])
            return .providerUnavailable(retryAfter: 60)
        }
        let refreshToken = try vault.open(try row.decode(PostgresBytes.self, "refresh_token"), context: TokenVault.Context.grant(account.id))
        // B2C: the policy the grant was issued under.
        let policy = provider.knownPolicy(try row.decode(String?.self, "policy"))
        let refreshed: OpenIDProvider.Refresh
        do {
            refreshed = try await provider.refresh(refreshToken, scopes: scopes.isEmpty ? nil : scopes, policy: policy, subject: account.subject)
        } catch {
            metrics.refreshed(provider: account.provider, outcome: "\(error.classification)")
            guard error.classification == .fatal else {
                logger.notice(
                    "upstream refresh failed; the grant is kept",
                    metadata: ["provider": .string(account.provider), "reason": .string(error.description)]
                )
                if case .providerUnavailable(let retryAfter?) = error.kind {
                    return .providerUnavailable(retryAfter: max(1, Int(retryAfter.components.seconds)))
                }
                return .providerUnavailable(retryAfter: 5)
            }
            try await markStale(account.id, reason: error.description, now: now, on: connection)
            return .grantRejected
        }
        metrics.refreshed(provider: account.provider, outcome: "ok")
        let tokens = refreshed.tokens
        let lifetime = tokens.accessTokenExpiresAt.map { $0.timeIntervalSince(now) } ?? settings.upstreamDefaultLifetime
        let rotation = UpstreamRotation(
            account: account.id,
            version: try row.decode(Int.self, "version"),
            refreshToken: tokens.refreshToken,
            refreshTokenExpiresAt: tokens.refreshTokenExpiresAt,
            idToken: tokens.idToken,
            scopeKey: scopeKey,
            token: UpstreamAccessToken(value: tokens.accessToken, expiresAt: now.addingTimeInterval(lifetime), scopes: scopes, issuedAt: now)
        )
        onRotation(rotation)
        guard try await write(rotation, now: now, on: connection) else { return .grantRejected }
        return .token(rotation.token)
    }

    /// Writes a refresh's result: the grant, if still at the version the refresh started from,
    /// and the access token. False when the grant changed or went meanwhile.
    func write(_ rotation: UpstreamRotation, now: Date, on connection: PostgresConnection) async throws -> Bool {
        let account = rotation.account
        let sealed = try rotation.refreshToken.map { token throws(CryptoError) in
            try vault.seal(token, context: TokenVault.Context.grant(account))
        }
        let hint = try rotation.idToken.map { token throws(CryptoError) in try vault.seal(token, context: TokenVault.Context.idToken(account)) }
        // A grant that was not rotated keeps its ciphertext (and so its key id).
        let updated = try await connection.query(
            """
            UPDATE upstream_grants SET refresh_token = COALESCE(\(sealed), refresh_token),
              key_id = CASE WHEN \(sealed)::bytea IS NULL THEN key_id ELSE \(vault.currentKeyID) END,
              expires_at = COALESCE(\(rotation.refreshTokenExpiresAt), expires_at),
              id_token_hint = COALESCE(\(hint), id_token_hint), version = version + 1, updated_at = \(now)
            WHERE account_id = \(account) AND version = \(rotation.version)
            """
        )
        guard updated.affectedRows == 1 else { return false }
        try await store(rotation.token, account: account, scopeKey: rotation.scopeKey, on: connection)
        return true
    }

    /// Stores (sealed) or replaces an account's access token for a scope key.
    func store(_ token: UpstreamAccessToken, account: UUID, scopeKey: String, on connection: PostgresConnection) async throws {
        let sealedToken = try vault.seal(token.value, context: TokenVault.Context.accessToken(account, scopeKey: scopeKey))
        try await connection.query(
            """
            INSERT INTO upstream_access_tokens (account_id, scope_key, access_token, key_id, expires_at, created_at)
            VALUES (\(account), \(scopeKey), \(sealedToken), \(vault.currentKeyID), \(token.expiresAt), \(token.issuedAt))
            ON CONFLICT (account_id, scope_key) DO UPDATE SET access_token = EXCLUDED.access_token, key_id = EXCLUDED.key_id,
              expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at
            """
        )
    }

    /// The provider no longer honours the grant: the account is stale (the sweeper removes it and
    /// its grant), its sessions end and its cached tokens go.
    private func markStale(_ account: UUID, reason: String, now: Date, on connection: PostgresConnection) async throws {
        try await connection.query(
            "UPDATE accounts SET state = 'stale', stale_reason = \(reason), updated_at = \(now) WHERE id = \(account)"
        )
        let ended = try await connection.query("DELETE FROM sessions WHERE account_id = \(account)")
        try await connection.query("DELETE FROM upstream_access_tokens WHERE account_id = \(account)")
        logger.notice(
            "the provider rejected an account's grant: account stale, sessions ended",
            metadata: ["account": .string(account.uuidString.lowercased()), "sessions_ended": .stringConvertible(ended.affectedRows)]
        )
    }

    /// The database failed after the provider answered a refresh: keep trying to write the answer
    /// (for ten minutes) so that a rotated refresh token is not lost.
    func rescue(_ rotation: UpstreamRotation) {
        let account = rotation.account.uuidString.lowercased()
        logger.warning("the database failed after an upstream refresh; writing the grant when it is back", metadata: ["account": .string(account)])
        Task { [self] in
            var delay = Duration.milliseconds(200)
            let giveUp = ContinuousClock.now.advanced(by: .seconds(600))
            while ContinuousClock.now < giveUp {
                do {
                    let written = try await database.withTransaction { connection in
                        try await write(rotation, now: clock.now(), on: connection)
                    }
                    if written {
                        logger.notice("the grant of an interrupted upstream refresh was written", metadata: ["account": .string(account)])
                    } else {
                        logger.error("the grant changed before an interrupted refresh could be written", metadata: ["account": .string(account)])
                    }
                    return
                } catch {
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(2))
                }
            }
            logger.error("gave up writing the grant of an interrupted upstream refresh", metadata: ["account": .string(account)])
        }
    }
}
