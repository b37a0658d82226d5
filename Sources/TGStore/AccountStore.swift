public import Foundation
import TGPostgres

/// An account's upstream grant as a refresh needs it.
public struct StoredGrant: Sendable {
    public var refreshToken: SealedBlob
    /// Bumped by every write: a refresh writes its result only if nobody wrote in between.
    public var version: Int
    /// B2C: the policy the grant was issued under.
    public var policy: String?
    public var refreshFailures: Int
    /// Until when refreshes wait (the provider failed); nil: no backoff.
    public var refreshRetryAt: Date?
    /// When an API's 401 last forced a refresh.
    public var forcedRefreshAt: Date?
    /// The account's state (`active` or `stale`).
    public var accountState: String
    /// What every instance knows of the grant's provider failing as a whole (nil: nothing).
    public var providerFault: ProviderFault?
}

/// A new or replaced grant.
public struct GrantWrite: Sendable {
    public var account: UUID
    public var refreshToken: SealedBlob
    public var keyID: String
    public var scopes: [String]
    public var expiresAt: Date?
    public var idTokenHint: SealedBlob?
    public var policy: String?

    public init(
        account: UUID,
        refreshToken: SealedBlob,
        keyID: String,
        scopes: [String],
        expiresAt: Date?,
        idTokenHint: SealedBlob?,
        policy: String?
    ) {
        self.account = account
        self.refreshToken = refreshToken
        self.keyID = keyID
        self.scopes = scopes
        self.expiresAt = expiresAt
        self.idTokenHint = idTokenHint
        self.policy = policy
    }
}

/// A refresh's result for the grant: what changed (nil keeps what is stored).
public struct GrantRotation: Sendable {
    public var account: UUID
    /// The version the refresh read; the write happens only if it is still the stored one.
    public var version: Int
    public var refreshToken: SealedBlob?
    public var keyID: String
    public var refreshTokenExpiresAt: Date?
    public var idTokenHint: SealedBlob?
    /// An API's 401 forced this refresh.
    public var forced: Bool

    public init(
        account: UUID,
        version: Int,
        refreshToken: SealedBlob?,
        keyID: String,
        refreshTokenExpiresAt: Date?,
        idTokenHint: SealedBlob?,
        forced: Bool
    ) {
        self.account = account
        self.version = version
        self.refreshToken = refreshToken
        self.keyID = keyID
        self.refreshTokenExpiresAt = refreshTokenExpiresAt
        self.idTokenHint = idTokenHint
        self.forced = forced
    }
}

/// An upstream access token as stored, sealed.
public struct StoredAccessToken: Sendable {
    public var sealed: SealedBlob
    public var expiresAt: Date
    public var issuedAt: Date
}

/// Which accounts to remove.
public enum AccountRemoval: Sendable {
    /// Those of `ids` that no session holds and no unredeemed, unexpired handoff code waits for.
    case withoutSessions([UUID])
    /// What the sweeper removes: accounts stale since `staleBefore` (their grace period over),
    /// active accounts unused since `idleSince`, and active accounts nothing holds; at most
    /// `limit`, skipping rows another transaction holds.
    case sweepable(idleSince: Date, staleBefore: Date, limit: Int)
}

/// The `accounts` table with each account's grant (`upstream_grants`) and its upstream access
/// tokens (`upstream_access_tokens`): removing an account removes both.
public struct AccountStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// Creates the account of (provider, issuer, subject), or brings it back to active with
    /// fresh display claims (a JSON object as text). Returns its id.
    public func upsert(provider: String, issuer: String, tenant: String?, subject: String, claims: String, now: Date) async throws -> UUID {
        // A stale account signing in again starts afresh: the sessions its rejected grant
        // suspended stay ended, and the valve has nothing of it to restore.
        let rows = try await executor.query(
            """
            WITH prior AS (SELECT id FROM accounts WHERE provider = \(provider) AND issuer = \(issuer) AND subject = \(subject)
                             AND state = 'stale'),
            suspended AS (DELETE FROM suspended_sessions WHERE account_id IN (SELECT id FROM prior)),
            rejections AS (DELETE FROM grant_rejections WHERE account_id IN (SELECT id FROM prior))
            INSERT INTO accounts (provider, issuer, tenant, subject, claims, state, stale_reason, created_at, updated_at, last_used_at)
            VALUES (\(provider), \(issuer), \(tenant), \(subject), \(claims)::jsonb, 'active', NULL, \(now), \(now), \(now))
            ON CONFLICT (provider, issuer, subject) DO UPDATE SET tenant = EXCLUDED.tenant, claims = EXCLUDED.claims,
              state = 'active', stale_reason = NULL, stale_at = NULL, updated_at = EXCLUDED.updated_at,
              last_used_at = EXCLUDED.last_used_at
            RETURNING id
            """
        )
        guard let row = rows.first else { throw StoreError.noRowReturned("accounts") }
        return try row.value(UUID.self, "id")
    }

    /// The id of the account of (provider, issuer, subject), whatever its state; nil when there is none.
    public func find(provider: String, issuer: String, subject: String) async throws -> UUID? {
        let rows = try await executor.query(
            "SELECT id FROM accounts WHERE provider = \(provider) AND issuer = \(issuer) AND subject = \(subject)"
        )
        return try rows.first?.value(UUID.self, "id")
    }

    /// The account, if it is active.
    public func findActive(_ id: UUID) async throws -> StoredAccount? {
        let rows = try await executor.query(
            """
            SELECT id, provider, issuer, subject, tenant, claims::text AS claims, state FROM accounts
            WHERE id = \(id) AND state = 'active'
            """
        )
        return try rows.first.map { try StoredAccount(row: $0) }
    }

    /// The accounts of `ids` that still exist, in any state.
    public func find(_ ids: [UUID]) async throws -> [StoredAccount] {
        let rows = try await executor.query(
            "SELECT id, provider, issuer, subject, tenant, claims::text AS claims, state FROM accounts WHERE id = ANY(\(ids)) ORDER BY id"
        )
        return try rows.rows.map { try StoredAccount(row: $0) }
    }

    /// Records that the account was used now (the sweeper removes accounts unused for too long).
    public func touch(_ id: UUID, now: Date) async throws {
        try await executor.query("UPDATE accounts SET last_used_at = \(now) WHERE id = \(id)")
    }

    /// The provider no longer honours the account's grant: the account turns stale, its sessions
    /// end and its stored access tokens go. The sessions wait in `suspended_sessions`, unusable,
    /// until the account is removed at the end of its grace period (the grant too is kept until
    /// then), so that ``restore(provider:rejectedSince:now:)`` can bring them back. Run it in a
    /// transaction. Returns how many sessions ended.
    public func markStale(_ id: UUID, reason: String, now: Date) async throws -> Int {
        try await executor.query(
            "UPDATE accounts SET state = 'stale', stale_reason = \(reason), stale_at = \(now), updated_at = \(now) WHERE id = \(id)"
        )
        try await executor.query("INSERT INTO suspended_sessions SELECT * FROM sessions WHERE account_id = \(id) ON CONFLICT DO NOTHING")
        let ended = try await executor.query("DELETE FROM sessions WHERE account_id = \(id)")
        try await executor.query("DELETE FROM upstream_access_tokens WHERE account_id = \(id)")
        return ended.affectedRows
    }

    /// The provider's rejections since `rejectedSince` were its fault, not the grants' (the
    /// safety valve, docs/proxy.md): their accounts turn active again and their suspended
    /// sessions that have not expired meanwhile come back. Run it in a transaction. Returns the
    /// accounts restored.
    public func restore(provider: String, rejectedSince: Date, now: Date) async throws -> [UUID] {
        let rows = try await executor.query(
            """
            UPDATE accounts a SET state = 'active', stale_reason = NULL, stale_at = NULL, updated_at = \(now)
            FROM grant_rejections r
            WHERE r.account_id = a.id AND r.provider = \(provider) AND r.rejected_at >= \(rejectedSince) AND a.state = 'stale'
            RETURNING a.id
            """
        )
        let ids = try rows.rows.map { try $0.value(UUID.self, "id") }
        guard !ids.isEmpty else { return [] }
        try await executor.query(
            """
            INSERT INTO sessions SELECT * FROM suspended_sessions
            WHERE account_id = ANY(\(ids)) AND expires_at > \(now) AND absolute_expires_at > \(now) ON CONFLICT DO NOTHING
            """
        )
        try await executor.query("DELETE FROM suspended_sessions WHERE account_id = ANY(\(ids))")
        try await executor.query("DELETE FROM grant_rejections WHERE account_id = ANY(\(ids))")
        return ids
    }

    /// Removes the accounts `removal` selects, in one statement that also moves their grants,
    /// still sealed, into the revocation queue (until `giveUpAt`): from then on no grant is
    /// usable, and none is lost before its provider revoked it. Returns how many accounts went
    /// and the queued tokens.
    public func remove(_ removal: AccountRemoval, giveUpAt: Date, now: Date) async throws -> (removed: Int, queued: [StoredRevocation]) {
        let condition: PostgresQuery
        switch removal {
        case .withoutSessions(let ids):
            condition = """
                SELECT a.id FROM accounts a WHERE a.id = ANY(\(ids))
                  AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.account_id = a.id)
                  AND NOT EXISTS (SELECT 1 FROM handoff_codes h WHERE h.account_id = a.id AND h.redeemed_at IS NULL
                                    AND h.expires_at > \(now))
                """
        case .sweepable(let idleSince, let staleBefore, let limit):
            condition = """
                SELECT a.id FROM accounts a
                WHERE (a.state = 'stale' AND (a.stale_at IS NULL OR a.stale_at <= \(staleBefore)))
                   OR (a.state = 'active' AND (a.last_used_at <= \(idleSince)
                       OR (NOT EXISTS (SELECT 1 FROM sessions s WHERE s.account_id = a.id)
                           AND NOT EXISTS (SELECT 1 FROM handoff_codes h WHERE h.account_id = a.id AND h.redeemed_at IS NULL
                                             AND h.expires_at > \(now)))))
                LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """
        }
        let rows = try await executor.query(
            """
            WITH gone AS (DELETE FROM accounts WHERE id IN (\(fragment: condition)) RETURNING id, provider),
            queued AS (
              INSERT INTO upstream_revocations (account_id, provider, policy, refresh_token, key_id, next_attempt_at, give_up_at)
              SELECT gone.id, gone.provider, g.policy, g.refresh_token, g.key_id, \(now), \(giveUpAt)
              FROM gone JOIN upstream_grants g ON g.account_id = gone.id
              RETURNING id, account_id, provider, policy, refresh_token, attempts)
            SELECT gone.id AS gone_id, q.id AS revocation_id, q.account_id, q.provider, q.policy, q.refresh_token, q.attempts
            FROM gone LEFT JOIN queued q ON q.account_id = gone.id
            """
        )
        let queued = try rows.rows.compactMap { row in
            try row.value(UUID?.self, "revocation_id") == nil ? nil : try StoredRevocation(row: row)
        }
        return (rows.count, queued)
    }

    // MARK: - The grant

    /// Stores the account's grant, replacing the one it had.
    public func storeGrant(_ grant: GrantWrite, now: Date) async throws {
        try await executor.query(
            """
            INSERT INTO upstream_grants (account_id, refresh_token, key_id, scopes, expires_at, id_token_hint, policy, created_at, updated_at)
            VALUES (\(grant.account), \(grant.refreshToken), \(grant.keyID), \(PostgresTextArray(grant.scopes)),
              \(grant.expiresAt), \(grant.idTokenHint), \(grant.policy), \(now), \(now))
            ON CONFLICT (account_id) DO UPDATE SET refresh_token = EXCLUDED.refresh_token, key_id = EXCLUDED.key_id,
              scopes = EXCLUDED.scopes, expires_at = EXCLUDED.expires_at, id_token_hint = EXCLUDED.id_token_hint,
              policy = EXCLUDED.policy, refresh_claimed_until = NULL,
              version = upstream_grants.version + 1, updated_at = EXCLUDED.updated_at
            """
        )
    }

    /// The account's grant with its account's state; nil when it has none.
    public func grant(_ account: UUID) async throws -> StoredGrant? {
        let rows = try await executor.query(
            """
            SELECT g.refresh_token, g.version, g.policy, g.refresh_failures, g.refresh_retry_at, g.forced_refresh_at, a.state,
              f.provider AS fault_provider, f.kind, f.reason, f.failing_since, f.retry_at, COALESCE(f.failures, 0) AS failures,
              f.restore_from, f.client_checked_at, f.attempt_until
            FROM upstream_grants g JOIN accounts a ON a.id = g.account_id LEFT JOIN provider_faults f ON f.provider = a.provider
            WHERE g.account_id = \(account)
            """
        )
        guard let row = rows.first else { return nil }
        let fault = try row.value(String?.self, "fault_provider") == nil ? nil : try ProviderFault(row: row)
        return StoredGrant(
            refreshToken: try row.value(SealedBlob.self, "refresh_token"),
            version: try row.value(Int.self, "version"),
            policy: try row.value(String?.self, "policy"),
            refreshFailures: try row.value(Int.self, "refresh_failures"),
            refreshRetryAt: try row.value(Date?.self, "refresh_retry_at"),
            forcedRefreshAt: try row.value(Date?.self, "forced_refresh_at"),
            accountState: try row.value(String.self, "state"),
            providerFault: fault
        )
    }

    /// What RP-initiated logout needs of the grant: the sealed ID token hint and the policy.
    public func logoutHint(_ account: UUID) async throws -> (idTokenHint: SealedBlob?, policy: String?)? {
        let rows = try await executor.query("SELECT id_token_hint, policy FROM upstream_grants WHERE account_id = \(account)")
        guard let row = rows.first else { return nil }
        return (try row.value(SealedBlob?.self, "id_token_hint"), try row.value(String?.self, "policy"))
    }

    /// Claims the grant at `version` for one refresh until `until` (migration 0011), for a
    /// caller that holds the grant's advisory lock: false when the grant moved past that version
    /// or another refresh's claim holds — one not expired at `now` and made on another server
    /// (before a failover or a restart). A claim made on this server is void: its holder's lock
    /// is free, so its session ended while this server lived (the process died).
    public func claimRefresh(_ account: UUID, version: Int, until: Date, now: Date) async throws -> Bool {
        let claimed = try await executor.query(
            """
            UPDATE upstream_grants SET refresh_claimed_until = \(until), refresh_claimed_on = pg_postmaster_start_time()
            WHERE account_id = \(account) AND version = \(version)
              AND (refresh_claimed_until IS NULL OR refresh_claimed_until <= \(now)
                   OR refresh_claimed_on = pg_postmaster_start_time())
            """
        )
        return claimed.affectedRows == 1
    }

    /// Gives up a refresh's claim whose answer changed nothing in the grant (a refused scope).
    public func releaseRefreshClaim(_ account: UUID) async throws {
        try await executor.query("UPDATE upstream_grants SET refresh_claimed_until = NULL WHERE account_id = \(account)")
    }

    /// A refresh failed without ending the grant: one more failure, and no refresh before
    /// `retryAt`; its claim is given up.
    public func recordRefreshFailure(_ account: UUID, retryAt: Date) async throws {
        try await executor.query(
            """
            UPDATE upstream_grants SET refresh_failures = refresh_failures + 1, refresh_retry_at = \(retryAt),
              refresh_claimed_until = NULL
            WHERE account_id = \(account)
            """
        )
    }

    /// Writes a refresh's result if the grant is still at the version the refresh read (a grant
    /// not rotated keeps its ciphertext and key id). False when it changed or went meanwhile.
    public func writeRotation(_ rotation: GrantRotation, now: Date) async throws -> Bool {
        let sealed = rotation.refreshToken
        let updated = try await executor.query(
            """
            UPDATE upstream_grants SET refresh_token = COALESCE(\(sealed), refresh_token),
              key_id = CASE WHEN \(sealed)::bytea IS NULL THEN key_id ELSE \(rotation.keyID) END,
              expires_at = COALESCE(\(rotation.refreshTokenExpiresAt), expires_at),
              id_token_hint = COALESCE(\(rotation.idTokenHint), id_token_hint), version = version + 1, updated_at = \(now),
              refresh_failures = 0, refresh_retry_at = NULL, refresh_claimed_until = NULL,
              forced_refresh_at = CASE WHEN \(rotation.forced) THEN \(now) ELSE forced_refresh_at END
            WHERE account_id = \(rotation.account) AND version = \(rotation.version)
            """
        )
        return updated.affectedRows == 1
    }

    /// Tells every instance to drop what it holds for `account` (as the triggers of migration
    /// 0003 do for deletions): an upstream token an API refused was replaced, and a replacement
    /// before expiry is otherwise not announced.
    public func announceInvalidation(_ account: UUID) async throws {
        try await executor.query("SELECT pg_notify(\(InvalidationFeed.channel), \(account.uuidString.lowercased()))")
    }

    // MARK: - Upstream access tokens

    /// Stores (or replaces) the account's access token for a scope key.
    public func storeAccessToken(
        _ sealed: SealedBlob,
        keyID: String,
        account: UUID,
        scopeKey: String,
        expiresAt: Date,
        issuedAt: Date
    ) async throws {
        try await executor.query(
            """
            INSERT INTO upstream_access_tokens (account_id, scope_key, access_token, key_id, expires_at, created_at)
            VALUES (\(account), \(scopeKey), \(sealed), \(keyID), \(expiresAt), \(issuedAt))
            ON CONFLICT (account_id, scope_key) DO UPDATE SET access_token = EXCLUDED.access_token, key_id = EXCLUDED.key_id,
              expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at
            """
        )
    }

    /// Removes every stored access token of the account (a stronger sign-in replaced its grant:
    /// tokens of the weaker one must not be used again).
    public func dropAccessTokens(_ account: UUID) async throws {
        try await executor.query("DELETE FROM upstream_access_tokens WHERE account_id = \(account)")
    }

    /// The account's stored access token for a scope key, whatever its expiry.
    public func accessToken(_ account: UUID, scopeKey: String) async throws -> StoredAccessToken? {
        let rows = try await executor.query(
            """
            SELECT access_token, expires_at, created_at FROM upstream_access_tokens
            WHERE account_id = \(account) AND scope_key = \(scopeKey)
            """
        )
        guard let row = rows.first else { return nil }
        return StoredAccessToken(
            sealed: try row.value(SealedBlob.self, "access_token"),
            expiresAt: try row.value(Date.self, "expires_at"),
            issuedAt: try row.value(Date.self, "created_at")
        )
    }
}
