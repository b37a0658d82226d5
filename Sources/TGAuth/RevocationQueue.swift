import Foundation
public import Logging
public import TGBase
public import TGOIDC
public import TGStore

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

/// Removing accounts and revoking their grants at the provider (RFC 7009): what a logout, a
/// back-channel logout, a grant that leaves accounts without sessions, and the sweeper share.
public final class RevocationQueue: Sendable {
    let store: Store
    let vault: TokenVault
    let providers: [String: OpenIDProvider]
    /// What was cached for a removed account is dropped at once.
    let cache: CredentialCache
    let settings: AuthSettings
    let clock: WallClock
    let logger: Logger

    public init(
        store: Store,
        vault: TokenVault,
        providers: [String: OpenIDProvider],
        cache: CredentialCache,
        settings: AuthSettings,
        clock: WallClock = .system,
        logger: Logger
    ) {
        self.store = store
        self.vault = vault
        self.providers = providers
        self.cache = cache
        self.settings = settings
        self.clock = clock
        self.logger = logger
    }

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

    /// Removes each of `accounts` that no session holds and no unredeemed handoff code waits for,
    /// with its grant, then revokes the grants at their providers (best effort). Returns how many
    /// accounts went.
    @discardableResult
    func removeAccountsWithoutSessions(_ accounts: [UUID]) async -> (removed: Int, revocations: [UpstreamRevocation]) {
        // Their sessions ended (or the grant went): nothing of theirs may be served from memory,
        // even before the database's notification comes back.
        cache.invalidate(accounts: accounts)
        guard !accounts.isEmpty else { return (0, []) }
        do {
            let now = clock.now()
            let (removed, queued) = try await removeAccounts(.withoutSessions(Array(Set(accounts))), now: now)
            return (removed, await revoke(queued))
        } catch {
            logger.warning("removing an account failed; the sweeper will retry", metadata: ["error_type": "\(type(of: error))"])
            return (0, [])
        }
    }
}
