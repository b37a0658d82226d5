import Foundation
import Logging
import TGBase
import TGPostgres

/// What one sweep removed.
public struct SweepReport: Sendable, Equatable, CustomStringConvertible {
    public var pendingLogins = 0
    public var handoffCodes = 0
    public var sessions = 0
    public var revokedRefreshTokens = 0
    public var accounts = 0
    public var devices = 0
    /// Upstream grants revoked at their provider (best effort: failures are only logged).
    public var upstreamRevocations = 0

    public init() {}

    public var description: String {
        "pending_logins=\(pendingLogins) handoff_codes=\(handoffCodes) sessions=\(sessions) accounts=\(accounts) "
            + "devices=\(devices) revoked_refresh_tokens=\(revokedRefreshTokens) upstream_revocations=\(upstreamRevocations)"
    }
}

extension AuthService {
    /// The advisory-lock key only one sweeper at a time holds (any instance, any process).
    static let sweeperLockKey: Int64 = 0x546F_6B47_5377_6570  // "TokGSwep"

    /// Clears everything stale (docs/architecture.md, "Sweeper"), in bounded batches.
    /// Returns nil without doing anything when another sweeper holds the lock.
    public func sweep() async throws -> SweepReport? {
        try await database.withConnection { lockHolder in
            // Not cancellable: a cancel that reached the statement after it took the lock would
            // leave the lock on the pooled connection with no one to give it back.
            let locked = try await lockHolder.queryIgnoringCancellation(
                "SELECT pg_try_advisory_lock(\(Self.sweeperLockKey)) AS locked"
            )
            guard try locked.first?.decode(Bool.self, "locked") == true else { return nil }
            let result: Result<SweepReport, any Error>
            do { result = .success(try await sweepLocked()) } catch { result = .failure(error) }
            // The lock is the session's: it must be given back whatever happened (an error, a
            // cancelled task), or the pooled connection would keep it and no sweeper run again.
            do {
                try await lockHolder.queryIgnoringCancellation("SELECT pg_advisory_unlock(\(Self.sweeperLockKey))")
            } catch {
                lockHolder.discardAfterUse()
            }
            let report = try result.get()
            logger.info("sweep", metadata: ["removed": .string(report.description)])
            metrics.swept(report)
            return report
        }
    }

    private func sweepLocked() async throws -> SweepReport {
        var report = SweepReport()
        let now = clock.now()
        let limit = settings.batchSize
        report.pendingLogins = try await deleteInBatches(limit) {
            """
            DELETE FROM pending_logins WHERE state_hash IN
              (SELECT state_hash FROM pending_logins WHERE expires_at <= \(now) LIMIT \(limit))
            """
        }
        report.handoffCodes = try await deleteInBatches(limit) {
            """
            DELETE FROM handoff_codes WHERE code_hash IN
              (SELECT code_hash FROM handoff_codes WHERE expires_at <= \(now) LIMIT \(limit))
            """
        }
        report.sessions = try await deleteInBatches(limit) {
            """
            DELETE FROM sessions WHERE id IN (SELECT id FROM sessions
              WHERE expires_at <= \(now) OR absolute_expires_at <= \(now) LIMIT \(limit))
            """
        }
        report.revokedRefreshTokens = try await deleteInBatches(limit) {
            """
            DELETE FROM revoked_refresh_tokens WHERE token_hash IN
              (SELECT token_hash FROM revoked_refresh_tokens WHERE expires_at <= \(now) LIMIT \(limit))
            """
        }
        // Replay answers outlive their grace window only until here.
        try await database.query(
            """
            UPDATE sessions SET replay_response = NULL
            WHERE replay_response IS NOT NULL AND rotated_at <= \(now.addingTimeInterval(-settings.refreshReplayGrace))
            """
        )
        // Accounts the IdP rejected, or that nothing holds any more, or unused past the idle lifetime.
        let idleSince = now.addingTimeInterval(-settings.sessionIdleTTL)
        while true {
            let (removed, queued) = try await removeAccounts(
                where: """
                    SELECT a.id FROM accounts a
                    WHERE a.state = 'stale' OR a.last_used_at <= \(idleSince)
                       OR (NOT EXISTS (SELECT 1 FROM sessions s WHERE s.account_id = a.id)
                           AND NOT EXISTS (SELECT 1 FROM handoff_codes h WHERE h.account_id = a.id AND h.redeemed_at IS NULL
                                             AND h.expires_at > \(now)))
                    LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """,
                now: now
            )
            report.accounts += removed
            report.upstreamRevocations += await revoke(queued).count { $0 == .revoked }
            if removed < limit { break }
        }
        // Grants queued earlier whose provider was down then.
        report.upstreamRevocations += try await drainRevocationQueue()
        report.devices = try await deleteInBatches(limit) {
            """
            DELETE FROM devices WHERE id IN (SELECT d.id FROM devices d
              WHERE d.last_seen_at <= \(now.addingTimeInterval(-settings.deviceIdleTTL)) AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.device_id = d.id)
              LIMIT \(limit))
            """
        }
        return report
    }

    private func deleteInBatches(_ limit: Int, _ statement: () -> PostgresQuery) async throws -> Int {
        var total = 0
        while true {
            let deleted = try await database.query(statement()).affectedRows
            total += deleted
            if deleted < limit { return total }
        }
    }
}
