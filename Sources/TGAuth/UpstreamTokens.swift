import Foundation
public import Logging
public import TGBase
public import TGOIDC
public import TGStore

/// An API behind TokenGate: the provider whose tokens it takes and the scopes they need.
public struct UpstreamResource: Sendable, Equatable {
    public var name: String
    public var provider: String
    public var scopes: [String]
    /// Whether apps may take its token themselves (token exchange); off: only the proxy uses it.
    public var allowsTokenExchange: Bool
    /// Whether a step-up sign-in for this API keeps its token apart (used for this API's calls
    /// until it expires, never refreshed) and leaves the account's grant as it was; off: the
    /// stronger sign-in's grant replaces the account's (``LoginFlow``, docs/proxy.md "Step-up").
    public var keepsStepUpApart: Bool

    public init(name: String, provider: String, scopes: [String], allowsTokenExchange: Bool = false, keepsStepUpApart: Bool = false) {
        self.name = name
        self.provider = provider
        self.scopes = scopes
        self.allowsTokenExchange = allowsTokenExchange
        self.keepsStepUpApart = keepsStepUpApart
    }
}

/// Upstream access tokens, from memory, the database or one refresh across every instance, and
/// the sessions of API calls, from memory when this instance saw them lately. Owns this
/// instance's ``CredentialCache`` and keeps it coherent (``followInvalidations(databaseURL:)``).
public final class UpstreamTokens: Sendable {
    let store: Store
    let vault: TokenVault
    let providers: [String: OpenIDProvider]
    /// The APIs whose tokens apps may ask for, by name.
    let resources: [String: UpstreamResource]
    let settings: AuthSettings
    /// Sessions and upstream tokens this instance holds in memory.
    let cache: CredentialCache
    let sessions: Sessions
    let clock: WallClock
    /// Refresh outcomes, single-flight waits.
    let metrics: AuthMetrics
    let logger: Logger
    let refreshes = SingleFlight<String, UpstreamAccessToken>()
    /// Refreshes under way in this instance, a background one included until it has returned.
    public var refreshesInFlight: Int { refreshes.count }
    /// Grants this instance knows to be in their refresh backoff window.
    let refreshBackoff = BackoffWindows<UUID>()
    /// Providers this instance knows to be failing as a whole, until their next attempt.
    let providerBackoff = BackoffWindows<String>()
    /// When this instance last wrote a provider's success for the safety valve, and last saw
    /// its client accepted.
    let providerMarks = ProviderMarks()
    /// Upstream rotations this instance wrote lately, written again after a failover.
    let recentRotations = RecentRotations()

    public init(
        store: Store,
        vault: TokenVault,
        providers: [String: OpenIDProvider],
        resources: [String: UpstreamResource],
        settings: AuthSettings,
        cache: CredentialCache,
        sessions: Sessions,
        clock: WallClock = .system,
        metrics: AuthMetrics = AuthMetrics(),
        logger: Logger
    ) {
        self.store = store
        self.vault = vault
        self.providers = providers
        self.resources = resources
        self.settings = settings
        self.cache = cache
        self.sessions = sessions
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    /// The session of a bearer token, for API calls: from memory when this instance saw it lately
    /// (so calls keep working while the database is away), else from the database.
    public func authenticateForAPI(accessToken: String) async throws -> SessionContext {
        guard let hash = OpaqueToken.hashIfWellFormed(accessToken) else { throw Sessions.invalidAccessToken }
        let now = clock.now()
        if let context = cache.session(hash, now: now) { return context }
        let ticket = cache.ticket()
        guard let context = try await sessions.session(hash: hash, requireValid: true) else { throw Sessions.invalidAccessToken }
        cache.store(session: context, hash: hash, validUntil: min(context.accessTokenExpiresAt, context.expiresAt), ticket: ticket)
        return context
    }

    /// The hash sessions are found by of a well-formed access token, from its bytes in place (its
    /// header field's); a malformed one is refused.
    public static func hash(_ accessToken: UnsafeBufferPointer<UInt8>) throws -> TokenHash {
        guard let hash = OpaqueToken.hashIfWellFormed(accessToken) else { throw Sessions.invalidAccessToken }
        return hash
    }

    /// A proxied call's credentials in memory, without waiting, under one lock: the session of a
    /// token's hash, when this instance holds it and its account is of `provider`, and that
    /// account's upstream access token for `scopes`, when one is held and not yet due for its
    /// refresh (one close to that point is still served, and refreshed in the background). Nil
    /// when either is missing: ask ``authenticateForAPI(accessToken:)`` and
    /// ``upstreamAccessToken(for:scopes:rejected:)``.
    public func cachedForAPI(
        hash: TokenHash,
        provider: String,
        scopes: UpstreamScopes
    ) -> (session: SessionContext, token: UpstreamAccessToken)? {
        let now = clock.now()
        guard let (session, cached) = cache.sessionAndToken(hash, scopeKey: scopes.key, now: now),
            session.account.provider == provider, let cached
        else { return nil }
        // Most calls find a token far from its refresh: handed out as it is, without `serve`'s
        // arguments (each one a copy of the account's or the scopes' strings, on every call).
        if isFresh(cached, now: now, ahead: true) { return (session, cached) }
        guard let token = serve(cached, account: session.account, scopes: scopes.scopes, scopeKey: scopes.key, now: now) else { return nil }
        return (session, token)
    }

    /// A valid upstream access token of the session's account for `scopes`: from memory, else
    /// from the database, else from one refresh with the stored refresh token. However many
    /// requests on however many instances ask at once, the provider sees one refresh: this
    /// process runs one flight per account and scope set, and instances take turns on the grant's
    /// row lock, the later ones finding the token the first one stored.
    ///
    /// `rejected` is a token the API refused (401 `invalid_token`): it is not handed out again.
    /// A grant the provider rejects marks the account stale and ends its sessions
    /// (``AuthProblem/Code/interactionRequired``); an unreachable provider keeps the grant and
    /// answers ``AuthProblem/Code/idpUnavailable`` unless a still-valid token can be served.
    public func upstreamAccessToken(
        for context: SessionContext,
        scopes: [String],
        rejected: String? = nil
    ) async throws -> UpstreamAccessToken {
        let scopeKey = Self.scopeKey(scopes)
        let account = context.account
        let now = clock.now()
        if let cached = cache.token(account: account.id, scopeKey: scopeKey), cached.value != rejected,
            let served = serve(cached, account: account, scopes: scopes, scopeKey: scopeKey, now: now)
        {
            return served
        }
        let flight = {
            try await self.refreshes.run(
                Self.flightKey(account.id, scopeKey),
                joined: { self.metrics.joinedRefresh(provider: account.provider) },
                work: { try await self.obtainUpstreamToken(account, scopes: scopes, scopeKey: scopeKey, rejected: rejected, ahead: false) }
            )
        }
        var token = try await flight()
        if let rejected, token.value == rejected {
            // The flight this call joined knew nothing of the refusal (a refresh ahead of expiry,
            // or a call without one) and kept the refused token, its provider failing: one more
            // flight, which knows. Only a forced refresh's cooldown hands it out again on purpose.
            token = try await flight()
        }
        if let rejected, token.value != rejected {
            // An API refused `rejected`, and other instances may hold it: they drop it, whichever
            // flight replaced it (this call's own, or a refresh ahead of expiry it joined, which
            // knew nothing of the refusal). Best effort: the token is served either way.
            try? await store.accounts.announceInvalidation(account.id)
        }
        return token
    }

    /// The single-flight key of an account's token for a scope set.
    static func flightKey(_ account: UUID, _ scopeKey: String) -> String { "\(account.uuidString) \(scopeKey)" }

    /// A token from memory if it is not yet due for its refresh (nil: it is). One within twice
    /// its refresh margin of expiry is still served, and starts one refresh in the background
    /// (the same flight the calls that find it due will join), so a busy user's calls do not
    /// wait for the provider. Not while the grant is in its backoff window: the token is then
    /// served as it is until it is due.
    private func serve(_ token: UpstreamAccessToken, account: AccountSummary, scopes: [String], scopeKey: String, now: Date) -> UpstreamAccessToken? {
        let left = token.expiresAt.timeIntervalSince(now)
        let margin = refreshMargin(token)
        guard left > margin else { return nil }
        if left > 2 * margin { return token }
        if let retryAt = backoff(account, now: now), retryAt > now { return token }
        refreshes.start(Self.flightKey(account.id, scopeKey)) { [self] in
            do {
                return try await obtainUpstreamToken(account, scopes: scopes, scopeKey: scopeKey, rejected: nil, ahead: true)
            } catch {
                // What the provider said was logged where it was settled; a joined call hears the error.
                let code = (error as? AuthProblem)?.code.rawValue ?? "\(type(of: error))"
                logger.debug(
                    "a refresh ahead of expiry brought no token",
                    metadata: ["account": .string(account.id.uuidString), "error": .string(code)]
                )
                throw error
            }
        }
        return token
    }

    /// The end of the backoff window this instance knows for the account's grant or its whole
    /// provider, if one is running at `now`.
    func backoff(_ account: AccountSummary, now: Date) -> Date? {
        let grant = refreshBackoff.until(account.id).flatMap { $0 > now ? $0 : nil }
        guard let provider = providerBackoff.until(account.provider), provider > now else { return grant }
        return max(grant ?? provider, provider)
    }

    /// Scopes in a canonical order, the key of the token cache (``UpstreamScopes/key``).
    static func scopeKey(_ scopes: [String]) -> String {
        // Configured scopes are usually listed sorted already (every proxied call comes here).
        if zip(scopes, scopes.dropFirst()).allSatisfy({ $0 < $1 }) { return scopes.joined(separator: " ") }
        return Set(scopes).sorted().joined(separator: " ")
    }

    /// The login's own access token, keyed for the APIs of its provider it serves: those asking
    /// for no particular scopes (a refresh without `scope` gives a token like it) and those
    /// whose scopes the provider listed as granted. The first call through the proxy after a
    /// login then needs no refresh.
    func loginAccessTokens(_ tokens: TokenResponse, provider: String, now: Date) -> [(scopeKey: String, token: UpstreamAccessToken)] {
        let granted = Set(tokens.scopes ?? [])
        let keys = Set(
            resources.values.filter { $0.provider == provider && granted.isSuperset(of: $0.scopes) }.map { Self.scopeKey($0.scopes) }
        )
        let expiresAt = now.addingTimeInterval(tokens.accessTokenLifetime ?? settings.upstreamDefaultLifetime)
        return keys.sorted().map { key in
            let scopes = key.isEmpty ? [] : key.split(separator: " ").map(String.init)
            return (key, UpstreamAccessToken(value: tokens.accessToken, expiresAt: expiresAt, scopes: scopes, issuedAt: now))
        }
    }

    /// A ticket for caching what a login stored (``cache(_:account:ticket:)``), taken before
    /// the login's transaction.
    func cacheTicket() -> CredentialCache.Ticket { cache.ticket() }

    /// The login's access tokens (``loginAccessTokens(_:provider:now:)``) once its transaction committed.
    func cache(_ tokens: [(scopeKey: String, token: UpstreamAccessToken)], account: UUID, ticket: CredentialCache.Ticket) {
        for (scopeKey, token) in tokens { cache.store(token: token, account: account, scopeKey: scopeKey, ticket: ticket) }
    }

    /// Not expiring before the refresh margin: the shorter of the configured margin and a quarter
    /// of the token's lifetime (a provider issuing 2-minute tokens is not asked every call).
    /// `ahead`: not before twice that margin (what a background refresh asks of a token).
    func isFresh(_ token: UpstreamAccessToken, now: Date, ahead: Bool = false) -> Bool {
        token.expiresAt.timeIntervalSince(now) > (ahead ? 2 : 1) * refreshMargin(token)
    }

    private func refreshMargin(_ token: UpstreamAccessToken) -> TimeInterval {
        min(settings.upstreamRefreshAhead, token.expiresAt.timeIntervalSince(token.issuedAt) / 4)
    }

    private func obtainUpstreamToken(
        _ account: AccountSummary,
        scopes: [String],
        scopeKey: String,
        rejected: String?,
        ahead: Bool
    ) async throws -> UpstreamAccessToken {
        let ticket = cache.ticket()
        let now = clock.now()
        let usable = { (token: UpstreamAccessToken?) -> UpstreamAccessToken? in
            guard let token, token.value != rejected, token.expiresAt > now else { return nil }
            return token
        }
        var fallback = usable(cache.token(account: account.id, scopeKey: scopeKey))
        var rotation: UpstreamRotation?
        let outcome: UpstreamRefreshOutcome
        do {
            if let stored = usable(try await storedUpstreamToken(account.id, scopeKey: scopeKey)) {
                if isFresh(stored, now: now, ahead: ahead) {
                    cache.store(token: stored, account: account.id, scopeKey: scopeKey, ticket: ticket)
                    return stored
                }
                fallback = fallback ?? stored
            }
            if let retryAt = backoff(account, now: now) {
                outcome = .providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now))
            } else {
                // One refresh per grant across instances: the grant's advisory lock, held on a
                // dedicated connection, not a pooled one, while the provider answers. A waiter
                // takes the token the holder stored as soon as it is there.
                outcome = try await store.grantLocks.withLock(
                    account.id,
                    deadline: .now + .seconds(settings.grantLockWait),
                    whileWaiting: { () async throws -> UpstreamRefreshOutcome? in
                        guard let stored = try await storedUpstreamToken(account.id, scopeKey: scopeKey), stored.value != rejected,
                            isFresh(stored, now: now, ahead: ahead)
                        else { return nil }
                        return .token(stored)
                    },
                    {
                        try await refreshHoldingGrantLock(account, scopes: scopes, scopeKey: scopeKey, rejected: rejected, ahead: ahead, now: now) {
                            rotation = $0
                        }
                    }
                )
            }
        } catch {
            // The provider may have rotated the grant already: its answer must not be lost with
            // the database connection. Serve the new token and write the grant when possible.
            if let rotation {
                rescue(rotation)
                cache.store(token: rotation.token, account: account.id, scopeKey: scopeKey, ticket: ticket)
                return rotation.token
            }
            if let fallback, Store.isDatabaseFailure(error) { return fallback }
            throw error
        }
        switch outcome {
        case .token(let token):
            cache.store(token: token, account: account.id, scopeKey: scopeKey, ticket: ticket)
            return token
        case .grantRejected:
            cache.invalidate(accounts: [account.id])
            throw interactionRequired(account)
        case .scopeRefused:
            throw AuthProblem(
                .consentRequired,
                "The identity provider refused the scopes \(scopeKey) for this account. The account stays signed in; "
                    + "a new login that asks for these scopes (consent) is needed to call this API.",
                details: ["scope": scopeKey, "login_endpoint": "/auth/login", "provider": account.provider]
            )
        case .providerUnavailable(let retryAfter):
            if let fallback { return fallback }
            throw AuthProblem(.idpUnavailable, "The identity provider cannot be reached; try again shortly.", retryAfter: retryAfter)
        }
    }

    /// The answer for an account whose grant the provider no longer honours.
    func interactionRequired(_ account: AccountSummary) -> AuthProblem {
        var details = ["login_endpoint": "/auth/login", "provider": account.provider]
        if let hint = account.email ?? account.preferredUsername { details["login_hint"] = hint }
        return AuthProblem(
            .interactionRequired,
            "The identity provider no longer accepts this account's sign-in (the grant was revoked or expired); its sessions "
                + "have ended. Sign in again: start a new login at login_endpoint.",
            details: details
        )
    }

    /// The stored access token of an account for a scope key, opened, whatever its expiry.
    func storedUpstreamToken(_ account: UUID, scopeKey: String) async throws -> UpstreamAccessToken? {
        guard let stored = try await store.accounts.accessToken(account, scopeKey: scopeKey) else { return nil }
        let sealed = stored.sealed
        guard let value = try? vault.open(sealed, context: TokenVault.Context.accessToken(account, scopeKey: scopeKey)) else {
            return nil
        }
        return UpstreamAccessToken(
            value: value,
            expiresAt: stored.expiresAt,
            scopes: scopeKey.split(separator: " ").map(String.init),
            issuedAt: stored.issuedAt
        )
    }
}

/// The scopes an API asks for, with the token cache's key for them made once.
public struct UpstreamScopes: Sendable {
    public let scopes: [String]
    /// ``UpstreamTokens/scopeKey(_:)`` of ``scopes``.
    let key: String

    public init(_ scopes: [String]) {
        self.scopes = scopes
        key = UpstreamTokens.scopeKey(scopes)
    }
}
