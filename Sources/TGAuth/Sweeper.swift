import Foundation
public import Logging
public import TGBase
public import TGStore

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
    /// Transfer codes past their lifetime, redeemed or not.
    public var transferCodes = 0
    /// Accepted logout tokens' ids past their window (the tokens are refused as too old anyway).
    public var logoutTokenIDs = 0
    /// Accepted security event tokens' ids past their window (refused as too old anyway).
    public var securityEventTokenIDs = 0
    /// Recorded DPoP proofs past their window (the proofs are refused as too old anyway).
    public var dpopProofs = 0
    /// Rate-limit buckets untouched for a minute (full again: a missing bucket is a full one).
    public var rateLimitBuckets = 0

    public init() {}

    public var description: String {
        "pending_logins=\(pendingLogins) handoff_codes=\(handoffCodes) sessions=\(sessions) accounts=\(accounts) "
            + "devices=\(devices) revoked_refresh_tokens=\(revokedRefreshTokens) upstream_revocations=\(upstreamRevocations) "
            + "transfer_codes=\(transferCodes) logout_token_ids=\(logoutTokenIDs) rate_limit_buckets=\(rateLimitBuckets)"
            + " dpop_proofs=\(dpopProofs) security_event_token_ids=\(securityEventTokenIDs)"
    }
}

/// Clears everything stale (docs/architecture.md, "Sweeper"): any instance may run it, one at a time.
public final class Sweeper: Sendable {
    let store: Store
    let settings: AuthSettings
    let revocations: RevocationQueue
    let clock: WallClock
    let metrics: AuthMetrics
    let logger: Logger

    public init(
        store: Store,
        settings: AuthSettings,
        revocations: RevocationQueue,
        clock: WallClock = .system,
        metrics: AuthMetrics = AuthMetrics(),
        logger: Logger
    ) {
        self.store = store
        self.settings = settings
        self.revocations = revocations
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    /// The advisory-lock key only one sweeper at a time holds (any instance, any process).
    static let sweeperLockKey: Int64 = 0x546F_6B47_5377_6570  // "TokGSwep"

    /// Clears everything stale (docs/architecture.md, "Sweeper"), in bounded batches.
    /// Returns nil without doing anything when another sweeper holds the lock.
    public func sweep() async throws -> SweepReport? {
        guard let report = try await store.exclusively(lockKey: Self.sweeperLockKey, sweepLocked) else { return nil }
        logger.info("sweep", metadata: ["removed": .string(report.description)])
        metrics.swept(report)
        return report
    }

    private func sweepLocked() async throws -> SweepReport {
        var report = SweepReport()
        let now = clock.now()
        let limit = settings.batchSize
        report.pendingLogins = try await inBatches(limit) { try await store.loginStates.deleteExpiredLogins(now: now, limit: limit) }
        report.handoffCodes = try await inBatches(limit) { try await store.loginStates.deleteExpiredHandoffs(now: now, limit: limit) }
        report.transferCodes = try await inBatches(limit) { try await store.transferCodes.deleteExpired(now: now, limit: limit) }
        report.sessions = try await inBatches(limit) { try await store.sessions.deleteExpired(now: now, limit: limit) }
        report.revokedRefreshTokens = try await inBatches(limit) {
            try await store.sessions.deleteExpiredRevokedTokens(now: now, limit: limit)
        }
        report.logoutTokenIDs = try await inBatches(limit) { try await store.logoutTokens.deleteExpired(now: now, limit: limit) }
        report.dpopProofs = try await inBatches(limit) { try await store.dpopProofs.deleteExpired(now: now, limit: limit) }
        report.securityEventTokenIDs = try await inBatches(limit) { try await store.securityEvents.deleteExpired(now: now, limit: limit) }
        // Every limit's allowance is per minute: a bucket untouched for one is full again.
        report.rateLimitBuckets = try await inBatches(limit) {
            try await store.rateLimits.deleteIdle(before: now.addingTimeInterval(-60), limit: limit)
        }
        // Replay answers outlive their grace window only until here.
        try await store.sessions.clearReplays(rotatedBefore: now.addingTimeInterval(-settings.refreshReplayGrace))
        try await store.transferCodes.clearReplays(redeemedBefore: now.addingTimeInterval(-settings.refreshReplayGrace))
        // Accounts the IdP rejected (past their grace period), or that nothing holds any more, or
        // unused past the idle lifetime.
        let idleSince = now.addingTimeInterval(-settings.sessionIdleTTL)
        while true {
            let (removed, queued) = try await revocations.removeAccounts(
                .sweepable(idleSince: idleSince, staleBefore: now.addingTimeInterval(-settings.rejectedGrantGrace), limit: limit),
                now: now
            )
            report.accounts += removed
            report.upstreamRevocations += await revocations.revoke(queued).count { $0 == .revoked }
            if removed < limit { break }
        }
        // Grants queued earlier whose provider was down then.
        report.upstreamRevocations += try await revocations.drainRevocationQueue()
        report.devices = try await inBatches(limit) {
            try await store.devices.deleteIdle(seenBefore: now.addingTimeInterval(-settings.deviceIdleTTL), limit: limit)
        }
        return report
    }

    /// Runs `batch` until it removes fewer than `limit` rows; returns how many it removed.
    private func inBatches(_ limit: Int, _ batch: () async throws -> Int) async throws -> Int {
        var total = 0
        while true {
            let deleted = try await batch()
            total += deleted
            if deleted < limit { return total }
        }
    }
}
