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
}

/// The `sessions` table: one row per (device, account), found by the hash of its access token.
public struct SessionStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// The session whose current access token hashes to `accessTokenHash`, expired or not.
    public func find(accessTokenHash: TokenHash) async throws -> StoredSession? {
        let rows = try await executor.query(
            """
            SELECT s.id AS session_id, s.device_id, s.client_id, s.access_expires_at, s.expires_at, a.state,
              a.id, a.provider, a.issuer, a.subject, a.tenant, a.claims::text AS claims
            FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.access_token_hash = \(accessTokenHash)
            """
        )
        guard let row = rows.first else { return nil }
        return StoredSession(
            id: try row.decode(UUID.self, "session_id"),
            deviceID: try row.decode(UUID.self, "device_id"),
            clientID: try row.decode(String.self, "client_id"),
            account: try StoredAccount(row: row),
            expiresAt: try row.decode(Date.self, "expires_at"),
            accessExpiresAt: try row.decode(Date.self, "access_expires_at")
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
        }
        return try rows.rows.map { try $0.decode(UUID.self, "account_id") }
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
        return try rows.rows.map { try $0.decode(UUID.self, "account_id") }
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

        public init(
            device: UUID,
            account: UUID,
            clientID: String,
            accessTokenHash: TokenHash,
            accessExpiresAt: Date,
            refreshTokenHash: TokenHash,
            expiresAt: Date,
            absoluteExpiresAt: Date,
            now: Date
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
        }
    }

    /// Starts the session of (device, account), replacing one it had: a new token family, no
    /// previous refresh token, no kept answer. Returns its id.
    public func start(_ session: Start) async throws -> UUID {
        let rows = try await executor.query(
            """
            INSERT INTO sessions (device_id, account_id, client_id, access_token_hash, access_expires_at, refresh_token_hash,
              expires_at, absolute_expires_at, created_at, last_used_at)
            VALUES (\(session.device), \(session.account), \(session.clientID), \(session.accessTokenHash), \(session.accessExpiresAt),
              \(session.refreshTokenHash), \(session.expiresAt), \(session.absoluteExpiresAt), \(session.now), \(session.now))
            ON CONFLICT (device_id, account_id) DO UPDATE SET client_id = EXCLUDED.client_id, family_id = gen_random_uuid(),
              access_token_hash = EXCLUDED.access_token_hash, access_expires_at = EXCLUDED.access_expires_at,
              refresh_token_hash = EXCLUDED.refresh_token_hash, previous_refresh_token_hash = NULL, rotated_at = NULL,
              replay_response = NULL, expires_at = EXCLUDED.expires_at, absolute_expires_at = EXCLUDED.absolute_expires_at,
              created_at = EXCLUDED.created_at, last_used_at = EXCLUDED.last_used_at
            RETURNING id
            """
        )
        guard let row = rows.first else { throw StoreError.noRowReturned("sessions") }
        return try row.decode(UUID.self, "id")
    }
}

/// A statement that must return a row returned none (a broken invariant of the schema).
public enum StoreError: Error, Sendable, Equatable {
    case noRowReturned(String)
}
