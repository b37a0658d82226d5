import Foundation
import Logging
import TGBase
import TGCrypto
import TGOIDC
import TGStore

/// What one refresh holding the grant's lock came to.
enum UpstreamRefreshOutcome {
    case token(UpstreamAccessToken)
    /// The provider rejected the grant (or it is gone): the account is stale, its sessions ended.
    case grantRejected
    /// The provider refused the scopes asked for; the grant is kept.
    case scopeRefused
    /// The provider could not answer (now, or within the grant's backoff window); the grant is untouched.
    case providerUnavailable(retryAfter: Int)
}

/// A provider's answer to a refresh, to be written: the grant (rotated or not) and the token.
struct UpstreamRotation: Sendable {
    var account: UUID
    /// The grant's version the refresh started from.
    var version: Int
    var refreshToken: String?
    var refreshTokenExpiresAt: Date?
    var idToken: String?
    var scopeKey: String
    var token: UpstreamAccessToken
    /// Whether an API's 401 forced this refresh (starts the forced-refresh cooldown).
    var forced: Bool
}

extension UpstreamTokens {
    /// Holding the grant's advisory lock (so no other instance refreshes it meanwhile), but no
    /// pooled connection and no transaction: use a token another holder stored while this one
    /// waited, else refresh once, unless the grant is in its backoff window, and write the
    /// result before anyone is answered. `onRotation` hears the provider's answer before it is
    /// written.
    func refreshHoldingGrantLock(
        _ account: AccountSummary,
        scopes: [String],
        scopeKey: String,
        rejected: String?,
        ahead: Bool,
        now: Date,
        onRotation: (UpstreamRotation) -> Void
    ) async throws -> UpstreamRefreshOutcome {
        guard let grant = try await store.accounts.grant(account.id), grant.accountState == "active" else { return .grantRejected }
        if let stored = try await storedUpstreamToken(account.id, scopeKey: scopeKey) {
            if stored.value != rejected, isFresh(stored, now: now, ahead: ahead) { return .token(stored) }
            // An API refused the token of a forced refresh made moments ago: another would not help.
            if stored.value == rejected, stored.expiresAt > now, let forcedAt = grant.forcedRefreshAt,
                now.timeIntervalSince(forcedAt) < settings.forcedRefreshCooldown
            {
                return .token(stored)
            }
        }
        if let retryAt = grant.refreshRetryAt, retryAt > now {
            refreshBackoff.hold(account.id, until: retryAt)
            return .providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now))
        }
        // A provider failing as a whole is asked once per window, by one caller of all instances.
        let heldUntil: Date?
        switch try await providerAttempt(account.provider, fault: grant.providerFault, now: now) {
        case .wait(let retryAt): return .providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now))
        case .ask(let held): heldUntil = held
        }
        func ask() async throws -> UpstreamRefreshOutcome {
            try await askProvider(grant, account: account, scopes: scopes, scopeKey: scopeKey, rejected: rejected, ahead: ahead, now: now, onRotation)
        }
        guard let heldUntil else { return try await ask() }
        // This caller has the attempt: whatever it comes to, the next caller must not wait for
        // its hold (an outcome that settled the provider cleared it already).
        do {
            let outcome = try await ask()
            await releaseAttempt(account.provider, heldUntil: heldUntil)
            return outcome
        } catch {
            await releaseAttempt(account.provider, heldUntil: heldUntil)
            throw error
        }
    }

    /// Claims the grant, asks the provider for a refresh, and settles what it answers.
    private func askProvider(
        _ grant: StoredGrant,
        account: AccountSummary,
        scopes: [String],
        scopeKey: String,
        rejected: String?,
        ahead: Bool,
        now: Date,
        _ onRotation: (UpstreamRotation) -> Void
    ) async throws -> UpstreamRefreshOutcome {
        var grant = grant
        let fault = grant.providerFault
        guard let provider = providers[account.provider] else {
            logger.error("an account's provider is not configured any more", metadata: ["provider": .string(account.provider)])
            return .providerUnavailable(retryAfter: 60)
        }
        // The lock alone does not fence the provider call: it dies with its server in a failover
        // while its holder may still be waiting for the provider. The claim is a row, and moves
        // to the new primary with the data.
        switch try await claim(&grant, account: account, provider: provider, scopeKey: scopeKey, rejected: rejected, ahead: ahead, now: now) {
        case .claimed: break
        case .settled(let outcome): return outcome
        }
        let refreshToken = try vault.open(grant.refreshToken, context: TokenVault.Context.grant(account.id))
        // B2C: the policy the grant was issued under.
        let policy = provider.knownPolicy(grant.policy)
        let refreshed: OpenIDProvider.Refresh
        do {
            refreshed = try await provider.refresh(refreshToken, scopes: scopes.isEmpty ? nil : scopes, policy: policy, subject: account.subject)
        } catch {
            metrics.refreshed(provider: account.provider, outcome: "\(error.classification)")
            let outcome = try await settle(error, provider: provider, account: account, grant: grant, scopeKey: scopeKey, now: now)
            // Settled without a new grant: nothing is in flight any more (a refused client and a
            // refused scope write nothing to the grant that would clear the claim).
            try await store.accounts.releaseRefreshClaim(account.id)
            return outcome
        }
        metrics.refreshed(provider: account.provider, outcome: "ok")
        let tokens = refreshed.tokens
        let lifetime = tokens.accessTokenLifetime ?? settings.upstreamDefaultLifetime
        let rotation = UpstreamRotation(
            account: account.id,
            version: grant.version,
            refreshToken: tokens.refreshToken,
            refreshTokenExpiresAt: tokens.refreshTokenExpiresAt,
            idToken: tokens.idToken,
            scopeKey: scopeKey,
            token: UpstreamAccessToken(value: tokens.accessToken, expiresAt: now.addingTimeInterval(lifetime), scopes: scopes, issuedAt: now),
            forced: rejected != nil
        )
        onRotation(rotation)
        guard try await store.transaction({ try await write(rotation, now: now, in: $0) }) else { return .grantRejected }
        recentRotations.remember(rotation)
        refreshBackoff.clear(account.id)
        await providerRefreshed(account.provider, fault: fault, now: now)
        return .token(rotation.token)
    }

    enum Claim {
        case claimed
        /// No refresh here: what to answer instead.
        case settled(UpstreamRefreshOutcome)
    }

    /// Claims `grant` for this refresh (``AccountStore/claimRefresh(_:version:until:now:)``)
    /// until the provider's request timeout and a minute more have passed: long enough for a
    /// holder whose write failed with the primary to write the provider's answer once a new
    /// primary is up (``rescue(_:)``). Another refresh's claim holds only when a failover (or a
    /// restart) took the grant's lock from its holder: its answer is waited for (the token it
    /// stores is taken) up to `grantLockWait`, and the provider is not asked again meanwhile.
    /// A claim whose holder died while the server lived is taken over at once.
    func claim(
        _ grant: inout StoredGrant,
        account: AccountSummary,
        provider: OpenIDProvider,
        scopeKey: String,
        rejected: String?,
        ahead: Bool,
        now: Date
    ) async throws -> Claim {
        let lifetime = TimeInterval(provider.configuration.requestTimeout.components.seconds) + 60
        let giveUp = ContinuousClock.now + .seconds(settings.grantLockWait)
        var pause = Duration.milliseconds(50)
        while true {
            let at = clock.now()
            if try await store.accounts.claimRefresh(account.id, version: grant.version, until: at.addingTimeInterval(lifetime), now: at) {
                return .claimed
            }
            if let stored = try await storedUpstreamToken(account.id, scopeKey: scopeKey), stored.value != rejected,
                isFresh(stored, now: now, ahead: ahead)
            {
                return .settled(.token(stored))
            }
            guard let again = try await store.accounts.grant(account.id), again.accountState == "active" else {
                return .settled(.grantRejected)
            }
            if again.version != grant.version {
                // Another refresh's answer landed (its token for other scopes, or one this call
                // cannot use): refresh from the grant it left, unless it left a backoff window.
                if let retryAt = again.refreshRetryAt, retryAt > now {
                    return .settled(.providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now)))
                }
                grant = again
                continue
            }
            guard ContinuousClock.now + pause < giveUp else {
                logger.warning(
                    "another instance's upstream refresh of this grant is still unanswered; not refreshing it again",
                    metadata: ["account": .string(account.id.uuidString.lowercased())]
                )
                return .settled(.providerUnavailable(retryAfter: 1))
            }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(250))
        }
    }

    /// What a failed refresh means (docs/proxy.md "When the provider refuses the refresh"): a
    /// rejection of the grant ends the account (unless the safety valve holds); a refusal of
    /// TokenGate's client keeps every grant and backs off the provider as a whole; an unclear
    /// refusal is settled by asking about the client alone; a refused scope fails this call
    /// only; anything else keeps the grant and starts (or lengthens) its backoff window, for
    /// every instance.
    private func settle(
        _ error: OIDCError,
        provider: OpenIDProvider,
        account: AccountSummary,
        grant: StoredGrant,
        scopeKey: String,
        now: Date
    ) async throws -> UpstreamRefreshOutcome {
        let fault = grant.providerFault
        switch error.classification {
        case .fatal:
            return try await grantRejected(account, reason: error.description, fault: fault, now: now)
        case .clientRefused:
            return try await providerRefusedClient(account, reason: error.description, now: now)
        case .unclear:
            switch await checkClient(provider, fault: fault, now: now) {
            case .accepted, .cannotTell:
                return try await grantRejected(account, reason: error.description, fault: fault, now: now)
            case .refused(let why):
                return try await providerRefusedClient(account, reason: "\(error.description); \(why)", now: now)
            case .unavailable:
                return try await backOffGrant(account, error: error, failures: grant.refreshFailures, now: now)
            }
        case .scopeRefused:
            logger.notice(
                "the provider refused the scopes of an upstream token; the grant is kept",
                metadata: ["provider": .string(account.provider), "reason": .string(error.description), "scopes": .string(scopeKey)]
            )
            return .scopeRefused
        case .transient, .failed:
            return try await backOffGrant(account, error: error, failures: grant.refreshFailures, now: now)
        }
    }

    /// Keeps the grant and starts (or lengthens) its own backoff window, for every instance.
    private func backOffGrant(_ account: AccountSummary, error: OIDCError, failures: Int, now: Date) async throws -> UpstreamRefreshOutcome {
        var window = min(settings.upstreamRefreshBackoffMax, settings.upstreamRefreshBackoffBase * pow(2, Double(min(failures, 20))))
        if case .providerUnavailable(let retryAfter?) = error.kind { window = max(window, Double(retryAfter.components.seconds)) }
        let retryAt = now.addingTimeInterval(window)
        try await store.accounts.recordRefreshFailure(account.id, retryAt: retryAt)
        refreshBackoff.hold(account.id, until: retryAt)
        logger.notice(
            "upstream refresh failed; the grant is kept",
            metadata: ["provider": .string(account.provider), "reason": .string(error.description), "retry_after": .stringConvertible(Int(window))]
        )
        return .providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now))
    }

    /// Whole seconds from `now` to `date`, at least 1 (a `Retry-After`).
    static func seconds(until date: Date, from now: Date) -> Int {
        max(1, Int(date.timeIntervalSince(now).rounded(.up)))
    }

    /// Writes a refresh's result: the grant, if still at the version the refresh started from,
    /// and the access token. False when the grant changed or went meanwhile.
    func write(_ rotation: UpstreamRotation, now: Date, in transaction: StoreTransaction) async throws -> Bool {
        let account = rotation.account
        let sealed = try rotation.refreshToken.map { token throws(CryptoError) in
            try vault.seal(token, context: TokenVault.Context.grant(account))
        }
        let hint = try rotation.idToken.map { token throws(CryptoError) in try vault.seal(token, context: TokenVault.Context.idToken(account)) }
        let written = try await transaction.accounts.writeRotation(
            GrantRotation(
                account: account,
                version: rotation.version,
                refreshToken: sealed,
                keyID: vault.currentKeyID,
                refreshTokenExpiresAt: rotation.refreshTokenExpiresAt,
                idTokenHint: hint,
                forced: rotation.forced
            ),
            now: now
        )
        guard written else { return false }
        try await storeAccessToken(rotation.token, account: account, scopeKey: rotation.scopeKey, in: transaction)
        return true
    }

    /// After the database may have failed over (the invalidation listener reconnected): writes
    /// again each upstream rotation of the last half minute that the new primary lacks
    /// (``RecentRotations``). Returns how many were missing.
    @discardableResult
    func rewriteRecentRotations() async -> Int {
        var restored = 0
        for rotation in recentRotations.recent() {
            do {
                if try await store.transaction({ try await write(rotation, now: clock.now(), in: $0) }) {
                    restored += 1
                    logger.warning(
                        "an upstream rotation the database lost was written again",
                        metadata: ["account": .string(rotation.account.uuidString.lowercased())]
                    )
                }
            } catch {
                // The database is away again: the next reconnection tries again.
                return restored
            }
        }
        return restored
    }

    /// Stores (sealed) or replaces an account's access token for a scope key.
    func storeAccessToken(_ token: UpstreamAccessToken, account: UUID, scopeKey: String, in transaction: StoreTransaction) async throws {
        try await transaction.accounts.storeAccessToken(
            try vault.seal(token.value, context: TokenVault.Context.accessToken(account, scopeKey: scopeKey)),
            keyID: vault.currentKeyID,
            account: account,
            scopeKey: scopeKey,
            expiresAt: token.expiresAt,
            issuedAt: token.issuedAt
        )
    }

    /// The database failed after the provider answered a refresh: keep trying to write the answer
    /// (for ten minutes) so that a rotated refresh token is not lost.
    func rescue(_ rotation: UpstreamRotation) {
        let account = rotation.account.uuidString.lowercased()
        logger.warning("the database failed after an upstream refresh; writing the grant when it is back", metadata: ["account": .string(account)])
        Task { [self] in
            var delay = Duration.milliseconds(200)
            let giveUp = ContinuousClock.now.advanced(by: .seconds(600))
            while ContinuousClock.now < giveUp {
                do {
                    let written = try await store.transaction { transaction in
                        try await write(rotation, now: clock.now(), in: transaction)
                    }
                    if written {
                        recentRotations.remember(rotation)
                        logger.notice("the grant of an interrupted upstream refresh was written", metadata: ["account": .string(account)])
                    } else {
                        logger.error("the grant changed before an interrupted refresh could be written", metadata: ["account": .string(account)])
                    }
                    return
                } catch {
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(2))
                }
            }
            logger.error("gave up writing the grant of an interrupted upstream refresh", metadata: ["account": .string(account)])
        }
    }
}
