public import Foundation
import TGPostgres

/// A transfer code as stored (`transfer_codes`), read with its row locked.
public struct TransferCodeRecord: Sendable, Equatable {
    public var clientID: String
    /// The device it was issued on; nil once that device is gone.
    public var device: UUID?
    /// The device's accounts when it was issued.
    public var accounts: [UUID]
    public var codeChallenge: String
    public var failedAttempts: Int
    public var expiresAt: Date
    public var redeemedAt: Date?
    /// The device its redemption created (a second presentation ends its sessions).
    public var redeemedDevice: UUID?
    /// Its redemption's answer, sealed, kept for the replay grace window.
    public var replay: SealedBlob?
}

/// A session a transfer can move: an account of the issuing device whose session there is live,
/// whose account is active and whose provider grant is stored and unexpired.
public struct TransferableSession: Sendable, Equatable {
    public var account: StoredAccount
    /// The moved session keeps its login's absolute expiry: a transfer never lengthens a login.
    public var absoluteExpiresAt: Date
    /// When its login happened (the new device lists its accounts in the same order).
    public var createdAt: Date
    /// The provider's `sid` of its login: a back-channel logout of that provider session still
    /// ends the moved session.
    public var providerSessionID: String?
}

/// The `transfer_codes` table: one-time codes that move a device's sessions to a fresh install
/// (an app transfer, a restore without the Keychain).
public struct TransferCodeStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// Stores a new code for `device`, keeping at most `limit` live codes per device: older ones
    /// beyond that are removed in the same transaction. The device's row is locked first, so two
    /// requests of one device cannot both stay within the limit by racing.
    public func issue(
        codeHash: TokenHash,
        clientID: String,
        device: UUID,
        accounts: [UUID],
        codeChallenge: String,
        now: Date,
        expiresAt: Date,
        limit: Int
    ) async throws {
        try await executor.query("SELECT id FROM devices WHERE id = \(device) FOR UPDATE")
        try await executor.query(
            """
            DELETE FROM transfer_codes WHERE code_hash IN (SELECT code_hash FROM transfer_codes
              WHERE device_id = \(device) AND redeemed_at IS NULL AND expires_at > \(now)
              ORDER BY created_at DESC, code_hash OFFSET \(max(limit - 1, 0)))
            """
        )
        try await executor.query(
            """
            INSERT INTO transfer_codes (code_hash, client_id, device_id, account_ids, code_challenge, created_at, expires_at)
            VALUES (\(codeHash), \(clientID), \(device), \(accounts), \(codeChallenge), \(now), \(expiresAt))
            """
        )
    }

    /// The code of `codeHash`, expired or not, its row locked until the transaction ends.
    public func lock(codeHash: TokenHash) async throws -> TransferCodeRecord? {
        let rows = try await executor.query(
            """
            SELECT client_id, device_id, account_ids, code_challenge, failed_attempts, expires_at, redeemed_at, redeemed_device_id,
              replay_response
            FROM transfer_codes WHERE code_hash = \(codeHash) FOR UPDATE
            """
        )
        guard let row = rows.first else { return nil }
        return TransferCodeRecord(
            clientID: try row.value(String.self, "client_id"),
            device: try row.value(UUID?.self, "device_id"),
            accounts: try row.value([UUID].self, "account_ids"),
            codeChallenge: try row.value(String.self, "code_challenge"),
            failedAttempts: try row.value(Int.self, "failed_attempts"),
            expiresAt: try row.value(Date.self, "expires_at"),
            redeemedAt: try row.value(Date?.self, "redeemed_at"),
            redeemedDevice: try row.value(UUID?.self, "redeemed_device_id"),
            replay: try row.value(SealedBlob?.self, "replay_response")
        )
    }

    /// Counts a wrong verifier or client; at `maxAttempts` the code is removed. Returns whether it
    /// is still usable.
    public func recordFailedAttempt(codeHash: TokenHash, maxAttempts: Int) async throws -> Bool {
        let rows = try await executor.query(
            "UPDATE transfer_codes SET failed_attempts = failed_attempts + 1 WHERE code_hash = \(codeHash) RETURNING failed_attempts"
        )
        guard let attempts = try rows.first?.value(Int.self, "failed_attempts") else { return false }
        guard attempts < maxAttempts else {
            try await executor.query("DELETE FROM transfer_codes WHERE code_hash = \(codeHash)")
            return false
        }
        return true
    }

    /// Marks the code redeemed by the new device, with its answer (`replay`, sealed) for a retry;
    /// it stays until it expires, to catch a reuse.
    public func markRedeemed(codeHash: TokenHash, newDevice: UUID?, replay: SealedBlob, now: Date) async throws {
        try await executor.query(
            """
            UPDATE transfer_codes SET redeemed_at = \(now), redeemed_device_id = \(newDevice), replay_response = \(replay)
            WHERE code_hash = \(codeHash)
            """
        )
    }

    /// Forgets the answers of codes redeemed at `redeemedBefore` or earlier (past the replay grace).
    public func clearReplays(redeemedBefore: Date) async throws {
        try await executor.query(
            "UPDATE transfer_codes SET replay_response = NULL WHERE replay_response IS NOT NULL AND redeemed_at <= \(redeemedBefore)"
        )
    }

    /// The sessions of `accounts` on `device` that a transfer can move (see ``TransferableSession``).
    public func transferable(accounts: [UUID], device: UUID, now: Date) async throws -> [TransferableSession] {
        let rows = try await executor.query(
            """
            SELECT a.id, a.provider, a.issuer, a.subject, a.tenant, a.claims::text AS claims, a.state, s.absolute_expires_at,
              s.created_at, s.provider_sid
            FROM sessions s JOIN accounts a ON a.id = s.account_id JOIN upstream_grants g ON g.account_id = a.id
            WHERE s.device_id = \(device) AND s.account_id = ANY(\(accounts))
              AND s.expires_at > \(now) AND s.absolute_expires_at > \(now) AND a.state = 'active'
              AND (g.expires_at IS NULL OR g.expires_at > \(now))
            ORDER BY s.created_at, a.id
            """
        )
        return try rows.rows.map { row in
            TransferableSession(
                account: try StoredAccount(row: row),
                absoluteExpiresAt: try row.value(Date.self, "absolute_expires_at"),
                createdAt: try row.value(Date.self, "created_at"),
                providerSessionID: try row.value(String?.self, "provider_sid")
            )
        }
    }

    /// Removes the device's codes that are not redeemed (a revocation, or the device moved away),
    /// but `kept`. Returns how many went.
    @discardableResult
    public func revoke(device: UUID, except kept: TokenHash? = nil) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM transfer_codes WHERE device_id = \(device) AND redeemed_at IS NULL
              AND (\(kept)::bytea IS NULL OR code_hash <> \(kept))
            """
        ).affectedRows
    }

    /// Removes up to `limit` expired codes, redeemed or not.
    public func deleteExpired(now: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM transfer_codes WHERE code_hash IN
              (SELECT code_hash FROM transfer_codes WHERE expires_at <= \(now) LIMIT \(limit))
            """
        ).affectedRows
    }
}
