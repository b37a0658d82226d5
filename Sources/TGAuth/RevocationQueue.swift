import Foundation
import Logging
import TGBase
import TGOIDC
import TGPostgres

/// What became of a removed account's upstream refresh token.
public enum UpstreamRevocation: String, Sendable, Equatable {
    /// The provider revoked it (RFC 7009), or said it was no longer valid anyway.
    case revoked
    /// The provider could not be reached: it stays queued, sealed, and a worker retries.
    case pending
    /// The provider has no revocation endpoint (Entra ID, …): the token lives on at the provider
    /// until it expires there; TokenGate has forgotten it.
    case notSupported = "not_supported"
}

/// One queued refresh token (a row of `upstream_revocations`).
struct QueuedRevocation: Sendable {
    var id: UUID
    var account: UUID
    var provider: String
    var policy: String?
    var sealed: PostgresBytes
    var attempts: Int

    init(row: PostgresRow) throws {
        id = try row.decode(UUID.self, "revocation_id")
        account = try row.decode(UUID.self, "account_id")
        provider = try row.decode(String.self, "provider")
        policy = try row.decode(String?.self, "policy")
        sealed = try row.decode(PostgresBytes.self, "refresh_token")
        attempts = try row.decode(Int.self, "attempts")
    }
}

extension AuthService {
    /// Removes the accounts `condition` selects (at most `limit`) in one statement that also moves
    /// their grants, still sealed, into the revocation queue: from then on no grant is usable,
    /// and none is lost before its provider revoked it. Returns the accounts removed and the
    /// queued tokens, to revoke at once with ``revoke(_:)``.
    func removeAccounts(where condition: PostgresQuery, now: Date) async throws -> (removed: Int, queued: [QueuedRevocation]) {
        let giveUp = now.addingTimeInterval(settings.revocationMaxAge)
        let rows = try await database.query(
            """
            WITH gone AS (DELETE FROM accounts WHERE id IN (\(fragment: condition)) RETURNING id, provider),
            queued AS (
              INSERT INTO upstream_revocations (account_id, provider, policy, refresh_token, key_id, next_attempt_at, give_up_at)
              SELECT gone.id, gone.provider, g.policy, g.refresh_token, g.key_id, \(now), \(giveUp)
              FROM gone JOIN upstream_grants g ON g.account_id = gone.id
              RETURNING id, account_id, provider, policy, refresh_token, attempts)
            SELECT gone.id AS gone_id, q.id AS revocation_id, q.account_id, q.provider, q.policy, q.refresh_token, q.attempts
            FROM gone LEFT JOIN queued q ON q.account_id = gone.id
            """
        )
        let queued = try rows.rows.compactMap { row in
            try row.decode(UUID?.self, "revocation_id") == nil ? nil : try QueuedRevocation(row: row)
        }
        return (rows.count, queued)
    }

    /// Tries each queued token once now: revoked, refused as already invalid, or at a provider
    /// without revocation, it leaves the queue; otherwise its next attempt waits (doubling from
    /// 30 s up to an hour) until the queue entry's age limit.
    func revoke(_ queued: [QueuedRevocation]) async -> [UpstreamRevocation] {
        var results: [UpstreamRevocation] = []
        for entry in queued {
            let result = await attemptRevocation(entry)
            let now = clock.now()
            do {
                if result == .pending {
                    let delay = min(3600, 30 * pow(2, Double(min(entry.attempts, 12))))
                    try await database.query(
                        """
                        UPDATE upstream_revocations SET attempts = attempts + 1, next_attempt_at = \(now.addingTimeInterval(delay))
                        WHERE id = \(entry.id)
                        """
                    )
                } else {
                    try await database.query("DELETE FROM upstream_revocations WHERE id = \(entry.id)")
                }
            } catch {
                logger.warning("the revocation queue could not be updated; the entry is retried", metadata: ["error_type": "\(type(of: error))"])
            }
            results.append(result)
        }
        return results
    }

    /// Revokes the queued tokens that are due (a worker: the sweeper calls it on every run, any
    /// instance), claiming each for a minute so that instances do not revoke the same one, and
    /// drops those past their age limit with an error log. Returns how many were revoked.
    @discardableResult
    public func drainRevocationQueue() async throws -> Int {
        let now = clock.now()
        let expired = try await database.query(
            "DELETE FROM upstream_revocations WHERE give_up_at <= \(now) RETURNING provider"
        )
        for row in expired.rows {
            logger.error(
                "gave up revoking an upstream refresh token: its provider was unreachable until the queue's age limit",
                metadata: ["provider": .string((try? row.decode(String.self, "provider")) ?? "?")]
            )
        }
        var revoked = 0
        while true {
            let claimed = try await database.query(
                """
                UPDATE upstream_revocations SET next_attempt_at = \(now.addingTimeInterval(60))
                WHERE id IN (SELECT id FROM upstream_revocations WHERE next_attempt_at <= \(now)
                             ORDER BY next_attempt_at LIMIT \(settings.batchSize) FOR UPDATE SKIP LOCKED)
                RETURNING id AS revocation_id, account_id, provider, policy, refresh_token, attempts
                """
            )
            let entries = try claimed.rows.map(QueuedRevocation.init(row:))
            revoked += await revoke(entries).count { $0 == .revoked }
            if entries.count < settings.batchSize { return revoked }
        }
    }

    private func attemptRevocation(_ entry: QueuedRevocation) async -> UpstreamRevocation {
        guard let provider = providers[entry.provider] else {
            logger.error("a queued revocation's provider is not configured any more", metadata: ["provider": .string(entry.provider)])
            return .pending
        }
        guard let refreshToken = try? vault.open(entry.sealed, context: TokenVault.Context.grant(entry.account)) else {
            logger.error("a queued refresh token cannot be opened (its key is gone); it is dropped", metadata: ["provider": .string(entry.provider)])
            return .notSupported
        }
        do {
            return try await provider.revoke(refreshToken: refreshToken, policy: provider.knownPolicy(entry.policy)) ? .revoked : .notSupported
        } catch {
            if case .grantRejected = error.kind {
                // The provider refuses it as invalid (already revoked, expired): nothing is left alive.
                return .revoked
            }
            logger.notice(
                "upstream revocation failed; queued for a retry",
                metadata: ["provider": .string(entry.provider), "reason": .string(error.description)]
            )
            return .pending
        }
    }
}
