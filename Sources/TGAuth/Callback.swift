import Foundation
import Logging
import TGBase
import TGCrypto
import TGOIDC
import TGStore

extension LoginFlow {
    /// Finishes a login at the callback: consumes the pending login (once), redeems the code,
    /// stores the account and its encrypted grant, and returns the app's redirect with a handoff
    /// code. Any failure after the state is known returns the app's redirect with `error` and
    /// leaves nothing stored. An unknown, used or expired state throws ``AuthProblem`` (no redirect).
    public func completeLogin(_ callback: CallbackParameters) async throws -> String {
        guard let state = callback.state, let stateHash = OpaqueToken.hashIfWellFormed(state) else {
            throw AuthProblem(.loginExpired, "This login is unknown or was already used. Start again from the app.")
        }
        let now = clock.now()
        guard let login = try await store.loginStates.consume(stateHash: stateHash) else {
            throw AuthProblem(.loginExpired, "This login is unknown or was already used. Start again from the app.")
        }
        guard login.expiresAt > now else {
            throw AuthProblem(.loginExpired, "This login took too long and expired. Start again from the app.")
        }
        // The app's registration may have changed since: its redirect must still be allowed.
        guard let client = clients[login.clientID], client.allows(redirectURI: login.redirectURI) else {
            throw AuthProblem(.loginExpired, "The app of this login is no longer registered. Start again from the app.")
        }
        func fail(_ error: String, _ reason: String, description: String? = nil) -> String {
            logger.warning("login failed", metadata: ["provider": .string(login.provider), "reason": .string(reason)])
            var parameters = [(name: "error", value: error)]
            if let description { parameters.append(("error_description", description)) }
            return Self.appRedirect(login.redirectURI, parameters + [("state", login.appState), ("iss", issuer)])
        }
        if let error = callback.error {
            return fail(Self.forwardableErrors.contains(error) ? error : "server_error", "provider returned an error")
        }
        guard let code = callback.code, !code.isEmpty, code.utf8.count <= 4096 else {
            return fail("invalid_request", "callback without code")
        }
        guard let provider = providers[login.provider] else { return fail("server_error", "provider no longer configured") }
        let pending = PendingAuthorization(
            provider: login.provider,
            policy: login.policy,
            state: state,
            nonce: login.nonce,
            codeVerifier: try vault.open(login.codeVerifier, context: TokenVault.Context.pendingLogin(stateHash)),
            issuer: login.issuer
        )
        let result: OpenIDProvider.Login
        do {
            result = try await provider.redeem(code: code, for: pending, callbackIssuer: callback.issuer)
        } catch {
            let answer = error.classification == .transient ? "temporarily_unavailable" : "server_error"
            return fail(answer, "code redemption failed: \(error.description)")
        }
        guard let idToken = result.idToken else { return fail("server_error", "provider issued no ID token") }
        guard let refreshToken = result.tokens.refreshToken else {
            // Without a refresh token TokenGate cannot keep the user signed in: nothing is stored.
            return fail("server_error", "provider issued no refresh token (offline_access / access_type=offline?)")
        }
        // A step-up (RFC 9470 §5): the sign-in must be what was asked, by the account asked for.
        // Nothing is stored otherwise, and the fresh grant is not revoked: at some providers
        // revoking one refresh token revokes every grant of the user to this client, the
        // account's everyday one included.
        if let shortfall = stepUpShortfall(login, idToken, provider: provider, now: now) {
            return fail(
                "insufficient_user_authentication",
                "step-up not met: \(shortfall)",
                description: "The sign-in did not meet what was asked: \(shortfall). Try again, or ask the user to use the stronger method."
            )
        }
        let apart: UpstreamResource?
        do {
            // The account this sign-in is, if it exists already: read once for both checks.
            var existing: UUID?
            if Self.isStepUp(login) {
                existing = try await store.accounts.find(provider: provider.name, issuer: idToken.issuer, subject: idToken.subject)
            }
            if let expected = login.stepUpAccount {
                guard existing == expected else {
                    return fail(
                        "access_denied",
                        "step-up signed in another user",
                        description: "The sign-in was by another user than the account being stepped up; sign in as that account."
                    )
                }
            }
            apart = try await apartResource(login, account: existing)
        } catch {
            return fail("temporarily_unavailable", "checking the step-up failed: \(type(of: error))")
        }
        let stepUp = Self.isStepUp(login)
        var apartToken: UpstreamAccessToken?
        if let apart {
            do {
                apartToken = try await self.apartToken(
                    result.tokens,
                    for: apart,
                    refreshToken: refreshToken,
                    provider: provider,
                    policy: login.policy,
                    subject: idToken.subject,
                    now: now
                )
            } catch {
                return fail("temporarily_unavailable", "the step-up token for \(apart.name) could not be had: \(error)")
            }
        }
        // Display claims the ID token lacks, from UserInfo (whose sub must be the ID token's).
        var claims = idToken.claims
        do {
            let extra = try await provider.userInfoClaims(accessToken: result.tokens.accessToken, idToken: idToken, policy: login.policy)
            for (name, value) in extra ?? [:] where claims[name] == nil { claims[name] = value }
        } catch  where error == .userInfoSubjectMismatch {
            _ = try? await provider.revoke(refreshToken: refreshToken, policy: login.policy)
            return fail("server_error", "userinfo names another subject than the ID token")
        } catch {
            // Only display claims are at stake: the login goes on with the ID token's.
            logger.warning(
                "userinfo unavailable; the account keeps the ID token's claims",
                metadata: ["provider": .string(login.provider), "reason": .string(error.description)]
            )
        }
        let handoff = OpaqueToken.mint()
        let accessTokens = upstream.loginAccessTokens(result.tokens, provider: provider.name, now: now)
        let ticket = upstream.cacheTicket()
        do {
            let account = try await store.transaction { transaction in
                let account = try await transaction.accounts.upsert(
                    provider: provider.name,
                    issuer: idToken.issuer,
                    tenant: idToken.tenantID,
                    subject: idToken.subject,
                    claims: Self.displayClaims(claims),
                    now: now
                )
                if let apart, let apartToken {
                    // The everyday grant and tokens stay; this one serves the API until it expires.
                    try await upstream.storeStepUpToken(apartToken, account: account, resource: apart.name, in: transaction)
                } else {
                    if stepUp {
                        // The weaker sign-in's tokens must not serve again: each is refreshed from this grant.
                        try await transaction.accounts.dropAccessTokens(account)
                    }
                    try await transaction.accounts.storeGrant(
                        GrantWrite(
                            account: account,
                            refreshToken: try vault.seal(refreshToken, context: TokenVault.Context.grant(account)),
                            keyID: vault.currentKeyID,
                            scopes: result.tokens.scopes ?? [],
                            expiresAt: result.tokens.refreshTokenExpiresAt,
                            idTokenHint: try vault.seal(idToken.raw, context: TokenVault.Context.idToken(account)),
                            policy: login.policy
                        ),
                        now: now
                    )
                    for (scopeKey, token) in accessTokens {
                        try await upstream.storeAccessToken(token, account: account, scopeKey: scopeKey, in: transaction)
                    }
                }
                if stepUp { try await transaction.accounts.announceInvalidation(account) }
                try await transaction.loginStates.issueHandoff(
                    codeHash: handoff.hash,
                    account: account,
                    clientID: login.clientID,
                    redirectURI: login.redirectURI,
                    codeChallenge: login.codeChallenge,
                    providerSessionID: idToken.sessionID,
                    now: now,
                    expiresAt: now.addingTimeInterval(settings.handoffCodeTTL)
                )
                return account
            }
            if stepUp {
                // Every instance drops what it held of the account (the notification above); this
                // one at once, so the app's next call finds the stronger sign-in's tokens.
                upstream.cache.invalidate(accounts: [account])
            } else {
                upstream.cache(accessTokens, account: account, ticket: ticket)
            }
        } catch {
            // Nothing was stored; the provider's fresh grant is revoked so none is left behind there
            // (not a step-up's kept apart: the account's everyday grant may go with it).
            if apart == nil { _ = try? await provider.revoke(refreshToken: refreshToken, policy: login.policy) }
            return fail("server_error", "storing the login failed: \(type(of: error))")
        }
        return Self.appRedirect(login.redirectURI, [("code", handoff.value), ("state", login.appState), ("iss", issuer)])
    }

    /// Errors a provider may send that mean the same to the app (OIDC Core §3.1.2.6, RFC 6749
    /// §4.1.2.1); anything else reaches it as `server_error`.
    static let forwardableErrors: Set<String> = [
        "access_denied", "login_required", "consent_required", "interaction_required", "account_selection_required",
        "temporarily_unavailable", "invalid_scope",
    ]

    /// `redirectURI` with `parameters` added to its query (its own query is kept).
    static func appRedirect(_ redirectURI: String, _ parameters: [(name: String, value: String)]) -> String {
        FormURLEncoding.url(redirectURI, adding: parameters)
    }

    /// The claims an app may show (name, email, picture); never the whole token.
    static func displayClaims(_ claims: [String: JSONValue]) -> String {
        var object: [String: JSONValue] = [:]
        for name in ["name", "given_name", "family_name", "email", "email_verified", "preferred_username", "picture"] {
            switch claims[name] {
            case .string(let text)?: object[name] = .string(text)
            case .bool(let flag)?: object[name] = .bool(flag)
            default: continue
            }
        }
        return SortedJSON.data(.object(object)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
