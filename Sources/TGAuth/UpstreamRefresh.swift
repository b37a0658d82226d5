import Foundation
import Logging
import TGBase
import TGCrypto
import TGOIDC
import TGPostgres

/// What one refresh holding the grant's lock came to.
enum UpstreamRefreshOutcome {
    case token(UpstreamAccessToken)
    /// The provider rejected the grant (or it is gone): the account is stale, its sessions ended.
    case grantRejected
    /// The provider refused the scopes asked for; the grant is kept.
    case scopeRefused
    /// The provider could not answer (now, or within the grant's backoff window); the grant is untouched.
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
    /// Whether an API's 401 forced this refresh (starts the forced-refresh cooldown).
    var forced: Bool
}

extension AuthService {
    /// The advisory-lock key of an account's grant: its id's first 64 bits (a collision only
    /// makes two grants take turns).
    static func grantLockKey(_ account: UUID) -> Int64 {
        let bytes = account.uuid
        let high = [bytes.0, bytes.1, bytes.2, bytes.3, bytes.4, bytes.5, bytes.6, bytes.7]
        return Int64(bitPattern: high.reduce(0) { $0 << 8 | UInt64($1) })
    }

    /// Holding the grant's advisory lock (so no other instance refreshes it meanwhile), but no
    /// pooled connection and no transaction: use a token another holder stored while this one
    /// waited, else refresh once, unless the grant is in its backoff window, and write the
    /// result before anyone is answered. `onRotation` hears the provider's answer before it is
    /// written.
    func refreshHoldingGrantLock(
        _ account: AccountSummary,
        scopes: [String],
        scopeKey: String,
        rejected: String?,
        ahead: Bool,
        now: Date,
        onRotation: (UpstreamRotation) -> Void
    ) async throws -> UpstreamRefreshOutcome {
        let rows = try await database.query(
            """
            SELECT g.refresh_token, g.version, g.policy, g.refresh_failures, g.refresh_retry_at, g.forced_refresh_at, a.state
            FROM upstream_grants g JOIN accounts a ON a.id = g.account_id WHERE g.account_id = \(account.id)
            """
        )
        guard let row = rows.first, try row.decode(String.self, "state") == "active" else { return .grantRejected }
        if let stored = try await storedUpstreamToken(account.id, scopeKey: scopeKey, on: nil) {
            if stored.value != rejected, isFresh(stored, now: now, ahead: ahead) { return .token(stored) }
            // An API refused the token of a forced refresh made moments ago: another would not help.
            if stored.value == rejected, stored.expiresAt > now, let forcedAt = try row.decode(Date?.self, "forced_refresh_at"),
                now.timeIntervalSince(forcedAt) < settings.forcedRefreshCooldown
            {
                return .token(stored)
            }
        }
        if let retryAt = try row.decode(Date?.self, "refresh_retry_at"), retryAt > now {
            refreshBackoff.hold(account.id, until: retryAt)
            return .providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now))
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
            return try await settle(error, account: account, scopeKey: scopeKey, failures: try row.decode(Int.self, "refresh_failures"), now: now)
        }
        metrics.refreshed(provider: account.provider, outcome: "ok")
        let tokens = refreshed.tokens
        let lifetime = tokens.accessTokenLifetime ?? settings.upstreamDefaultLifetime
        let rotation = UpstreamRotation(
            account: account.id,
            version: try row.decode(Int.self, "version"),
            refreshToken: tokens.refreshToken,
            refreshTokenExpiresAt: tokens.refreshTokenExpiresAt,
            idToken: tokens.idToken,
            scopeKey: scopeKey,
            token: UpstreamAccessToken(value: tokens.accessToken, expiresAt: now.addingTimeInterval(lifetime), scopes: scopes, issuedAt: now),
            forced: rejected != nil
        )
        onRotation(rotation)
        guard try await database.withTransaction({ try await write(rotation, now: now, on: $0) }) else { return .grantRejected }
        refreshBackoff.clear(account.id)
        return .token(rotation.token)
    }

    /// What a failed refresh means for the grant (docs/proxy.md "When the provider refuses the
    /// refresh"): a rejection ends the account; a refused scope fails this call only; anything
    /// else keeps the grant and starts (or lengthens) its backoff window, for every instance.
    private func settle(
        _ error: OIDCError,
        account: AccountSummary,
        scopeKey: String,
        failures: Int,
        now: Date
    ) async throws -> UpstreamRefreshOutcome {
        let metadata: Logger.Metadata = ["provider": .string(account.provider), "reason": .string(error.description)]
        switch error.classification {
        case .fatal:
            if case .clientRejected = error.kind {
                logger.error("the provider refused TokenGate's client: check client_id, the secret or key, and the registration", metadata: metadata)
            }
            try await database.withTransaction { try await markStale(account.id, reason: error.description, now: now, on: $0) }
            return .grantRejected
        case .scopeRefused:
            logger.notice(
                "the provider refused the scopes of an upstream token; the grant is kept",
                metadata: metadata.merging(["scopes": .string(scopeKey)]) { $1 }
            )
            return .scopeRefused
        case .transient, .failed:
            var window = min(settings.upstreamRefreshBackoffMax, settings.upstreamRefreshBackoffBase * pow(2, Double(min(failures, 20))))
            if case .providerUnavailable(let retryAfter?) = error.kind { window = max(window, Double(retryAfter.components.seconds)) }
            let retryAt = now.addingTimeInterval(window)
            try await database.query(
                "UPDATE upstream_grants SET refresh_failures = refresh_failures + 1, refresh_retry_at = \(retryAt) WHERE account_id = \(account.id)"
            )
            refreshBackoff.hold(account.id, until: retryAt)
            logger.notice(
                "upstream refresh failed; the grant is kept",
                metadata: metadata.merging(["retry_after": .stringConvertible(Int(window))]) { $1 }
            )
            return .providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now))
        }
    }

    /// Whole seconds from `now` to `date`, at least 1 (a `Retry-After`).
    static func seconds(until date: Date, from now: Date) -> Int {
        max(1, Int(date.timeIntervalSince(now).rounded(.up)))
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
              id_token_hint = COALESCE(\(hint), id_token_hint), version = version + 1, updated_at = \(now),
              refresh_failures = 0, refresh_retry_at = NULL,
              forced_refresh_at = CASE WHEN \(rotation.forced) THEN \(now) ELSE forced_refresh_at END
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
