import Foundation
import Logging
import TGBase
import TGCrypto
import TGOIDC
import TGPostgres
import TGStore

extension AuthService {
    /// Finishes a login at the callback: consumes the pending login (once), redeems the code,
    /// stores the account and its encrypted grant, and returns the app's redirect with a handoff
    /// code. Any failure after the state is known returns the app's redirect with `error` and
    /// leaves nothing stored. An unknown, used or expired state throws ``AuthProblem`` (no redirect).
    public func completeLogin(_ callback: CallbackParameters) async throws -> String {
        guard let state = callback.state, let stateHash = OpaqueToken.hashIfWellFormed(state) else {
            throw AuthProblem(.loginExpired, "This login is unknown or was already used. Start again from the app.")
        }
        let now = clock.now()
        let rows = try await database.query(
            """
            DELETE FROM pending_logins WHERE state_hash = \(stateHash)
            RETURNING client_id, redirect_uri, app_state, code_challenge, provider, policy, nonce, code_verifier, issuer, expires_at
            """
        )
        guard let row = rows.first else {
            throw AuthProblem(.loginExpired, "This login is unknown or was already used. Start again from the app.")
        }
        guard try row.decode(Date.self, "expires_at") > now else {
            throw AuthProblem(.loginExpired, "This login took too long and expired. Start again from the app.")
        }
        let login = try PendingLogin(row: row)
        // The app's registration may have changed since: its redirect must still be allowed.
        guard let client = clients[login.clientID], client.allows(redirectURI: login.redirectURI) else {
            throw AuthProblem(.loginExpired, "The app of this login is no longer registered. Start again from the app.")
        }
        func fail(_ error: String, _ reason: String) -> String {
            logger.warning("login failed", metadata: ["provider": .string(login.provider), "reason": .string(reason)])
            return Self.appRedirect(login.redirectURI, [("error", error), ("state", login.appState), ("iss", issuer)])
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
        let accessTokens = loginAccessTokens(result.tokens, provider: provider.name, now: now)
        let ticket = cache.ticket()
        do {
            let account = try await database.withTransaction { connection in
                let account = try await upsertAccount(idToken, claims: claims, provider: provider.name, now: now, on: connection)
                try await storeGrant(
                    account: account,
                    refreshToken: refreshToken,
                    tokens: result.tokens,
                    idToken: idToken.raw,
                    policy: login.policy,
                    now: now,
                    on: connection
                )
                for (scopeKey, token) in accessTokens { try await store(token, account: account, scopeKey: scopeKey, on: connection) }
                try await connection.query(
                    """
                    INSERT INTO handoff_codes (code_hash, account_id, client_id, redirect_uri, code_challenge, created_at, expires_at)
                    VALUES (\(handoff.hash), \(account), \(login.clientID), \(login.redirectURI), \(login.codeChallenge), \(now),
                      \(now.addingTimeInterval(settings.handoffCodeTTL)))
                    """
                )
                return account
            }
            for (scopeKey, token) in accessTokens { cache.store(token: token, account: account, scopeKey: scopeKey, ticket: ticket) }
        } catch {
            // Nothing was stored; the provider's fresh grant is revoked so none is left behind there.
            _ = try? await provider.revoke(refreshToken: refreshToken, policy: login.policy)
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

    func upsertAccount(
        _ idToken: IDToken,
        claims: [String: JSONValue],
        provider: String,
        now: Date,
        on connection: PostgresConnection
    ) async throws -> UUID {
        let rows = try await connection.query(
            """
            INSERT INTO accounts (provider, issuer, tenant, subject, claims, state, stale_reason, created_at, updated_at, last_used_at)
            VALUES (\(provider), \(idToken.issuer), \(idToken.tenantID), \(idToken.subject), \(Self.displayClaims(claims))::jsonb,
              'active', NULL, \(now), \(now), \(now))
            ON CONFLICT (provider, issuer, subject) DO UPDATE SET tenant = EXCLUDED.tenant, claims = EXCLUDED.claims,
              state = 'active', stale_reason = NULL, updated_at = EXCLUDED.updated_at, last_used_at = EXCLUDED.last_used_at
            RETURNING id
            """
        )
        return try rows.first!.decode(UUID.self, "id")
    }

    func storeGrant(
        account: UUID,
        refreshToken: String,
        tokens: TokenResponse,
        idToken: String?,
        policy: String?,
        now: Date,
        on connection: PostgresConnection
    ) async throws {
        let sealed = try vault.seal(refreshToken, context: TokenVault.Context.grant(account))
        let hint = try idToken.map { raw throws(CryptoError) in try vault.seal(raw, context: TokenVault.Context.idToken(account)) }
        try await connection.query(
            """
            INSERT INTO upstream_grants (account_id, refresh_token, key_id, scopes, expires_at, id_token_hint, policy, created_at, updated_at)
            VALUES (\(account), \(sealed), \(vault.currentKeyID), \(PostgresTextArray(tokens.scopes ?? [])),
              \(tokens.refreshTokenExpiresAt), \(hint), \(policy), \(now), \(now))
            ON CONFLICT (account_id) DO UPDATE SET refresh_token = EXCLUDED.refresh_token, key_id = EXCLUDED.key_id,
              scopes = EXCLUDED.scopes, expires_at = EXCLUDED.expires_at, id_token_hint = EXCLUDED.id_token_hint,
              policy = EXCLUDED.policy,
              version = upstream_grants.version + 1, updated_at = EXCLUDED.updated_at
            """
        )
    }

    /// The claims an app may show (name, email, picture); never the whole token.
    static func displayClaims(_ claims: [String: JSONValue]) -> String {
        var object: [String: Any] = [:]
        for name in ["name", "given_name", "family_name", "email", "email_verified", "preferred_username", "picture"] {
            switch claims[name] {
            case .string(let text)?: object[name] = text
            case .bool(let flag)?: object[name] = flag
            default: continue
            }
        }
        return SortedJSON.string(object) ?? "{}"
    }
}

/// A pending login as read back at the callback.
struct PendingLogin {
    var clientID: String
    var redirectURI: String
    var appState: String
    var codeChallenge: String
    var provider: String
    var policy: String?
    var nonce: String
    var codeVerifier: PostgresBytes
    var issuer: String

    init(row: PostgresRow) throws {
        clientID = try row.decode(String.self, "client_id")
        redirectURI = try row.decode(String.self, "redirect_uri")
        appState = try row.decode(String?.self, "app_state") ?? ""
        codeChallenge = try row.decode(String.self, "code_challenge")
        provider = try row.decode(String.self, "provider")
        policy = try row.decode(String?.self, "policy")
        nonce = try row.decode(String.self, "nonce")
        codeVerifier = try row.decode(PostgresBytes.self, "code_verifier")
        issuer = try row.decode(String.self, "issuer")
    }
}
