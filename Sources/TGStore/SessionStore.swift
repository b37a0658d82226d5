public import Foundation
import TGPostgres

/// A session as stored, with its account.
public struct StoredSession: Sendable, Equatable {
    public var id: UUID
    public var deviceID: UUID
    public var clientID: String
    public var account: StoredAccount
    /// When the session ends unless refreshed (idle expiry).
    public var expiresAt: Date
    /// When its current access token expires.
    public var accessExpiresAt: Date
    /// The thumbprint of the key its tokens are bound to (RFC 9449 `cnf.jkt`); nil: bearer.
    public var dpopJKT: String?
}

/// Which sessions to end.
public enum SessionSelection: Sendable, Equatable {
    /// One session.
    case session(UUID)
    /// Every session of a device.
    case device(UUID)
    /// One account's session on a device.
    case account(UUID, device: UUID)
    /// An account's sessions on every device.
    case everywhere(account: UUID)
    /// Every session of a refresh-token family (a rotated-away token came back).
    case family(UUID)
    /// The sessions a provider's back-channel logout names: those its session id started, or
    /// every session of its subject.
    case provider(ProviderLogoutTarget)
}

/// A session as a refresh finds it by its current refresh token, its row locked.
public struct RefreshingSession: Sendable {
    public var id: UUID
    public var clientID: String
    public var familyID: UUID
    public var expiresAt: Date
    public var absoluteExpiresAt: Date
    public var account: StoredAccount
    /// The key its tokens are bound to; nil: bearer.
    public var dpopJKT: String?
}

/// A session whose previous refresh token was presented, its row locked.
public struct RotatedSession: Sendable {
    public var id: UUID
    public var clientID: String
    public var familyID: UUID
    public var rotatedAt: Date?
    /// The last answer, sealed, kept for the replay grace window.
    public var replay: SealedBlob?
    /// The key its tokens are bound to; nil: bearer.
    public var dpopJKT: String?
}

/// A refresh's new tokens for a session.
public struct SessionRotation: Sendable {
    public var session: UUID
    public var familyID: UUID
    public var accessTokenHash: TokenHash
    public var accessExpiresAt: Date
    public var refreshTokenHash: TokenHash
    /// The token this refresh spent: it becomes the previous one, and revoked until the
    /// session's absolute expiry.
    public var spentRefreshTokenHash: TokenHash
    public var absoluteExpiresAt: Date
    /// The answer, sealed, for a retry within the grace window.
    public var replay: SealedBlob
    /// The key the session's tokens are bound to from now on (RFC 9449); nil keeps it unbound.
    public var dpopJKT: String?
    /// The new idle expiry (never past the absolute one).
    public var idleExpiresAt: Date
    public var now: Date

    public init(
        session: UUID,
        familyID: UUID,
        accessTokenHash: TokenHash,
        accessExpiresAt: Date,
        refreshTokenHash: TokenHash,
        spentRefreshTokenHash: TokenHash,
        absoluteExpiresAt: Date,
        replay: SealedBlob,
        idleExpiresAt: Date,
        now: Date,
        dpopJKT: String? = nil
    ) {
        self.dpopJKT = dpopJKT
        self.session = session
        self.familyID = familyID
        self.accessTokenHash = accessTokenHash
        self.accessExpiresAt = accessExpiresAt
        self.refreshTokenHash = refreshTokenHash
        self.spentRefreshTokenHash = spentRefreshTokenHash
        self.absoluteExpiresAt = absoluteExpiresAt
        self.replay = replay
        self.idleExpiresAt = idleExpiresAt
        self.now = now
    }
}

/// The `sessions` table: one row per (device, account), found by the hash of its access token.
public struct SessionStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// The session whose current access token hashes to `accessTokenHash`, expired or not.
    public func find(accessTokenHash: TokenHash) async throws -> StoredSession? {
        let rows = try await executor.query(
            """
            SELECT s.id AS session_id, s.device_id, s.client_id, s.access_expires_at, s.expires_at, s.dpop_jkt, a.state,
              a.id, a.provider, a.issuer, a.subject, a.tenant, a.claims::text AS claims
            FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.access_token_hash = \(accessTokenHash)
            """
        )
        guard let row = rows.first else { return nil }
        return StoredSession(
            id: try row.value(UUID.self, "session_id"),
            deviceID: try row.value(UUID.self, "device_id"),
            clientID: try row.value(String.self, "client_id"),
            account: try StoredAccount(row: row),
            expiresAt: try row.value(Date.self, "expires_at"),
            accessExpiresAt: try row.value(Date.self, "access_expires_at"),
            dpopJKT: try row.value(String?.self, "dpop_jkt")
        )
    }

    /// The active accounts with an unexpired session on `device`, in the order they signed in.
    public func accounts(onDevice device: UUID, now: Date) async throws -> [StoredAccount] {
        let rows = try await executor.query(
            """
            SELECT a.id, a.provider, a.issuer, a.subject, a.tenant, a.claims::text AS claims, a.state
            FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.device_id = \(device) AND s.expires_at > \(now) AND a.state = 'active'
            ORDER BY s.created_at, a.id
            """
        )
        return try rows.rows.map { try StoredAccount(row: $0) }
    }

    /// Ends the sessions `selection` names. Returns the account of each ended session (an account
    /// left without a session is then removed by the domain).
    @discardableResult
    public func end(_ selection: SessionSelection) async throws -> [UUID] {
        let rows: PostgresRows
        switch selection {
        case .session(let id):
            rows = try await executor.query("DELETE FROM sessions WHERE id = \(id) RETURNING account_id")
        case .device(let device):
            rows = try await executor.query("DELETE FROM sessions WHERE device_id = \(device) RETURNING account_id")
        case .account(let account, let device):
            rows = try await executor.query(
                "DELETE FROM sessions WHERE device_id = \(device) AND account_id = \(account) RETURNING account_id"
            )
        case .everywhere(let account):
            rows = try await executor.query("DELETE FROM sessions WHERE account_id = \(account) RETURNING account_id")
        case .family(let family):
            rows = try await executor.query("DELETE FROM sessions WHERE family_id = \(family) RETURNING account_id")
        case .provider(let target):
            let accounts = target.accountCondition
            if let sessionID = target.sessionID {
                rows = try await executor.query(
                    """
                    DELETE FROM sessions s USING accounts a
                    WHERE a.id = s.account_id AND \(fragment: accounts) AND s.provider_sid = \(sessionID)
                    RETURNING s.account_id
                    """
                )
            } else {
                rows = try await executor.query(
                    "DELETE FROM sessions s USING accounts a WHERE a.id = s.account_id AND \(fragment: accounts) RETURNING s.account_id"
                )
            }
        }
        return try rows.rows.map { try $0.value(UUID.self, "account_id") }
    }

    /// Ends the device's sessions that expired (idle or absolute) or whose account went stale.
    /// Returns the accounts they belonged to.
    public func endStale(onDevice device: UUID, now: Date) async throws -> [UUID] {
        let rows = try await executor.query(
            """
            DELETE FROM sessions s USING accounts a
            WHERE s.device_id = \(device) AND a.id = s.account_id
              AND (s.expires_at <= \(now) OR s.absolute_expires_at <= \(now) OR a.state = 'stale')
            RETURNING s.account_id
            """
        )
        return try rows.rows.map { try $0.value(UUID.self, "account_id") }
    }

    /// What a new session starts with.
    public struct Start: Sendable {
        public var device: UUID
        public var account: UUID
        public var clientID: String
        public var accessTokenHash: TokenHash
        public var accessExpiresAt: Date
        public var refreshTokenHash: TokenHash
        public var expiresAt: Date
        public var absoluteExpiresAt: Date
        public var now: Date
        /// When its login happened (a device's accounts are listed in this order); now by default.
        public var createdAt: Date?
        /// The key its tokens are bound to (RFC 9449); nil: bearer.
        public var dpopJKT: String?
        /// The provider's session id of the login (`sid`), when its ID token had one.
        public var providerSessionID: String?

        public init(
            device: UUID,
            account: UUID,
            clientID: String,
            accessTokenHash: TokenHash,
            accessExpiresAt: Date,
            refreshTokenHash: TokenHash,
            expiresAt: Date,
            absoluteExpiresAt: Date,
            now: Date,
            createdAt: Date? = nil,
            dpopJKT: String? = nil,
            providerSessionID: String? = nil
        ) {
            self.device = device
            self.account = account
            self.clientID = clientID
            self.accessTokenHash = accessTokenHash
            self.accessExpiresAt = accessExpiresAt
            self.refreshTokenHash = refreshTokenHash
            self.expiresAt = expiresAt
            self.absoluteExpiresAt = absoluteExpiresAt
            self.now = now
            self.createdAt = createdAt
            self.dpopJKT = dpopJKT
            self.providerSessionID = providerSessionID
        }
    }

    /// Starts the session of (device, account), replacing one it had: a new token family, no
    /// previous refresh token, no kept answer, the new login's provider session. Returns its id.
    public func start(_ session: Start) async throws -> UUID {
        let rows = try await executor.query(
            """
            INSERT INTO sessions (device_id, account_id, client_id, access_token_hash, access_expires_at, refresh_token_hash,
              expires_at, absolute_expires_at, created_at, last_used_at, dpop_jkt, provider_sid)
            VALUES (\(session.device), \(session.account), \(session.clientID), \(session.accessTokenHash), \(session.accessExpiresAt),
              \(session.refreshTokenHash), \(session.expiresAt), \(session.absoluteExpiresAt), \(session.createdAt ?? session.now), \(session.now),
              \(session.dpopJKT), \(session.providerSessionID))
            ON CONFLICT (device_id, account_id) DO UPDATE SET client_id = EXCLUDED.client_id, family_id = gen_random_uuid(),
              provider_sid = EXCLUDED.provider_sid,
              access_token_hash = EXCLUDED.access_token_hash, access_expires_at = EXCLUDED.access_expires_at,
              refresh_token_hash = EXCLUDED.refresh_token_hash, previous_refresh_token_hash = NULL, rotated_at = NULL,
              replay_response = NULL, expires_at = EXCLUDED.expires_at, absolute_expires_at = EXCLUDED.absolute_expires_at,
              created_at = EXCLUDED.created_at, last_used_at = EXCLUDED.last_used_at, dpop_jkt = EXCLUDED.dpop_jkt
            RETURNING id
            """
        )
        guard let row = rows.first else { throw StoreError.noRowReturned("sessions") }
        return try row.value(UUID.self, "id")
    }

    /// Of `ids`, the sessions that live at `now` (unexpired, their account active), each with
    /// when it ends unless refreshed first (its idle expiry, or its absolute one when sooner).
    public func liveUntil(_ ids: [UUID], now: Date) async throws -> [UUID: Date] {
        guard !ids.isEmpty else { return [:] }
        let rows = try await executor.query(
            """
            SELECT s.id, LEAST(s.expires_at, s.absolute_expires_at) AS until
            FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.id = ANY(\(ids)) AND s.expires_at > \(now) AND s.absolute_expires_at > \(now) AND a.state = 'active'
            """
        )
        var live: [UUID: Date] = [:]
        for row in rows.rows { live[try row.value(UUID.self, "id")] = try row.value(Date.self, "until") }
        return live
    }

    // MARK: - Refresh rotation

    /// The session whose current refresh token hashes to `hash`, its row locked.
    public func lockForRefresh(refreshTokenHash hash: TokenHash) async throws -> RefreshingSession? {
        let rows = try await executor.query(
            """
            SELECT s.id AS session_id, s.client_id, s.family_id, s.expires_at, s.absolute_expires_at, s.dpop_jkt, a.state,
              a.id, a.provider, a.issuer, a.subject, a.tenant, a.claims::text AS claims
            FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.refresh_token_hash = \(hash) FOR UPDATE OF s
            """
        )
        guard let row = rows.first else { return nil }
        return RefreshingSession(
            id: try row.value(UUID.self, "session_id"),
            clientID: try row.value(String.self, "client_id"),
            familyID: try row.value(UUID.self, "family_id"),
            expiresAt: try row.value(Date.self, "expires_at"),
            absoluteExpiresAt: try row.value(Date.self, "absolute_expires_at"),
            account: try StoredAccount(row: row),
            dpopJKT: try row.value(String?.self, "dpop_jkt")
        )
    }

    /// Gives a session its new tokens: the spent refresh token becomes the previous one and is
    /// recorded as revoked (for reuse detection) until the session's absolute expiry.
    public func rotate(_ rotation: SessionRotation) async throws {
        try await executor.query(
            """
            UPDATE sessions SET access_token_hash = \(rotation.accessTokenHash), access_expires_at = \(rotation.accessExpiresAt),
              refresh_token_hash = \(rotation.refreshTokenHash), previous_refresh_token_hash = \(rotation.spentRefreshTokenHash),
              rotated_at = \(rotation.now), replay_response = \(rotation.replay), last_used_at = \(rotation.now),
              expires_at = LEAST(\(rotation.idleExpiresAt), absolute_expires_at), dpop_jkt = \(rotation.dpopJKT)
            WHERE id = \(rotation.session)
            """
        )
        try await executor.query(
            """
            INSERT INTO revoked_refresh_tokens (token_hash, family_id, expires_at)
            VALUES (\(rotation.spentRefreshTokenHash), \(rotation.familyID), \(rotation.absoluteExpiresAt)) ON CONFLICT DO NOTHING
            """
        )
    }

    /// The session whose previous refresh token hashes to `hash`, its row locked.
    public func lockByPreviousRefreshToken(_ hash: TokenHash) async throws -> RotatedSession? {
        let rows = try await executor.query(
            """
            SELECT id, client_id, family_id, rotated_at, replay_response, dpop_jkt FROM sessions
            WHERE previous_refresh_token_hash = \(hash) FOR UPDATE
            """
        )
        guard let row = rows.first else { return nil }
        return RotatedSession(
            id: try row.value(UUID.self, "id"),
            clientID: try row.value(String.self, "client_id"),
            familyID: try row.value(UUID.self, "family_id"),
            rotatedAt: try row.value(Date?.self, "rotated_at"),
            replay: try row.value(SealedBlob?.self, "replay_response"),
            dpopJKT: try row.value(String?.self, "dpop_jkt")
        )
    }

    /// The family of a refresh token rotated away earlier, if it is still remembered.
    public func revokedFamily(refreshTokenHash hash: TokenHash) async throws -> UUID? {
        let rows = try await executor.query("SELECT family_id FROM revoked_refresh_tokens WHERE token_hash = \(hash)")
        return try rows.first?.value(UUID.self, "family_id")
    }

    // MARK: - Sweeping

    /// Removes up to `limit` sessions past their idle or absolute expiry.
    public func deleteExpired(now: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM sessions WHERE id IN (SELECT id FROM sessions
              WHERE expires_at <= \(now) OR absolute_expires_at <= \(now) LIMIT \(limit))
            """
        ).affectedRows
    }

    /// Forgets up to `limit` revoked refresh tokens whose session would have expired anyway.
    public func deleteExpiredRevokedTokens(now: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM revoked_refresh_tokens WHERE token_hash IN
              (SELECT token_hash FROM revoked_refresh_tokens WHERE expires_at <= \(now) LIMIT \(limit))
            """
        ).affectedRows
    }

    /// Drops the kept answers of rotations made before `rotatedBefore` (past the grace window).
    public func clearReplays(rotatedBefore: Date) async throws {
        try await executor.query(
            "UPDATE sessions SET replay_response = NULL WHERE replay_response IS NOT NULL AND rotated_at <= \(rotatedBefore)"
        )
    }
}
