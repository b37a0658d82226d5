import Foundation
import Logging
import TGBase
import TGOIDC
import TGStore

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

extension AuthService {
    /// Removes the accounts `removal` selects; their grants go, still sealed, into the
    /// revocation queue in the same statement (``AccountStore/remove(_:giveUpAt:now:)``).
    /// Returns how many went and the queued tokens, to revoke at once with ``revoke(_:)``.
    func removeAccounts(_ removal: AccountRemoval, now: Date) async throws -> (removed: Int, queued: [StoredRevocation]) {
        try await store.accounts.remove(removal, giveUpAt: now.addingTimeInterval(settings.revocationMaxAge), now: now)
    }

    /// Tries each queued token once now: revoked, refused as already invalid, or at a provider
    /// without revocation, it leaves the queue; otherwise its next attempt waits (doubling from
    /// 30 s up to an hour) until the queue entry's age limit.
    func revoke(_ queued: [StoredRevocation]) async -> [UpstreamRevocation] {
        var results: [UpstreamRevocation] = []
        for entry in queued {
            let result = await attemptRevocation(entry)
            let now = clock.now()
            do {
                if result == .pending {
                    let delay = min(3600, 30 * pow(2, Double(min(entry.attempts, 12))))
                    try await store.revocations.retryLater(entry.id, at: now.addingTimeInterval(delay))
                } else {
                    try await store.revocations.remove(entry.id)
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
        for provider in try await store.revocations.dropExpired(now: now) {
            logger.error(
                "gave up revoking an upstream refresh token: its provider was unreachable until the queue's age limit",
                metadata: ["provider": .string(provider)]
            )
        }
        var revoked = 0
        while true {
            let entries = try await store.revocations.claimDue(now: now, leaseUntil: now.addingTimeInterval(60), limit: settings.batchSize)
            revoked += await revoke(entries).count { $0 == .revoked }
            if entries.count < settings.batchSize { return revoked }
        }
    }

    private func attemptRevocation(_ entry: StoredRevocation) async -> UpstreamRevocation {
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
            switch error.kind {
            case .grantRejected, .unclearRejection:
                // The provider refuses it as invalid (already revoked, expired): nothing is left alive.
                return .revoked
            default: break
            }
            logger.notice(
                "upstream revocation failed; queued for a retry",
                metadata: ["provider": .string(entry.provider), "reason": .string(error.description)]
            )
            return .pending
        }
    }
}
