public import Foundation
import TGPostgres

/// One queued refresh token of a removed account (a row of `upstream_revocations`).
public struct StoredRevocation: Sendable {
    public var id: UUID
    public var account: UUID
    public var provider: String
    public var policy: String?
    public var sealed: SealedBlob
    public var attempts: Int

    init(row: PostgresRow) throws {
        id = try row.value(UUID.self, "revocation_id")
        account = try row.value(UUID.self, "account_id")
        provider = try row.value(String.self, "provider")
        policy = try row.value(String?.self, "policy")
        sealed = try row.value(SealedBlob.self, "refresh_token")
        attempts = try row.value(Int.self, "attempts")
    }
}

/// The queue of removed accounts' refresh tokens still to revoke at their providers
/// (`upstream_revocations`), shared by every instance. Tokens enter it with their account's
/// removal (``AccountStore/remove(_:giveUpAt:now:)``).
public struct RevocationStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// Drops the entries past their age limit; returns each one's provider.
    public func dropExpired(now: Date) async throws -> [String] {
        let rows = try await executor.query("DELETE FROM upstream_revocations WHERE give_up_at <= \(now) RETURNING provider")
        return rows.rows.map { (try? $0.value(String.self, "provider")) ?? "?" }
    }

    /// Claims up to `limit` due entries until `leaseUntil`, so that other instances leave them
    /// alone meanwhile (rows another transaction holds are skipped).
    public func claimDue(now: Date, leaseUntil: Date, limit: Int) async throws -> [StoredRevocation] {
        let rows = try await executor.query(
            """
            UPDATE upstream_revocations SET next_attempt_at = \(leaseUntil)
            WHERE id IN (SELECT id FROM upstream_revocations WHERE next_attempt_at <= \(now)
                         ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING id AS revocation_id, account_id, provider, policy, refresh_token, attempts
            """
        )
        return try rows.rows.map(StoredRevocation.init(row:))
    }

    /// One more failed attempt; the next waits until `nextAttemptAt`.
    public func retryLater(_ id: UUID, at nextAttemptAt: Date) async throws {
        try await executor.query(
            "UPDATE upstream_revocations SET attempts = attempts + 1, next_attempt_at = \(nextAttemptAt) WHERE id = \(id)"
        )
    }

    /// The entry is settled (revoked, or nothing more can be done).
    public func remove(_ id: UUID) async throws {
        try await executor.query("DELETE FROM upstream_revocations WHERE id = \(id)")
    }
}
