public import Foundation
import TGPostgres

/// A login between `/auth/login` and the provider's callback (`pending_logins`).
public struct PendingLoginRecord: Sendable {
    public var stateHash: TokenHash
    public var clientID: String
    public var redirectURI: String
    /// The app's own `state`.
    public var appState: String
    public var codeChallenge: String
    public var provider: String
    public var policy: String?
    public var nonce: String
    /// TokenGate's PKCE verifier toward the provider, sealed.
    public var codeVerifier: SealedBlob
    public var keyID: String
    public var issuer: String
    public var createdAt: Date
    public var expiresAt: Date
    /// A step-up's `acr_values` (space-separated) and `max_age`, which the ID token must meet.
    public var acrValues: String?
    public var maxAge: Int?
    /// A step-up's account: the sign-in must be its user.
    public var stepUpAccount: UUID?
    /// A step-up's API (its name): where its token goes.
    public var stepUpResource: String?

    public init(
        stateHash: TokenHash,
        clientID: String,
        redirectURI: String,
        appState: String,
        codeChallenge: String,
        provider: String,
        policy: String?,
        nonce: String,
        codeVerifier: SealedBlob,
        keyID: String,
        issuer: String,
        createdAt: Date,
        expiresAt: Date,
        acrValues: String? = nil,
        maxAge: Int? = nil,
        stepUpAccount: UUID? = nil,
        stepUpResource: String? = nil
    ) {
        self.stateHash = stateHash
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.appState = appState
        self.codeChallenge = codeChallenge
        self.provider = provider
        self.policy = policy
        self.nonce = nonce
        self.codeVerifier = codeVerifier
        self.keyID = keyID
        self.issuer = issuer
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.stepUpAccount = stepUpAccount
        self.stepUpResource = stepUpResource
    }
}

/// A handoff code as stored (`handoff_codes`), read with its row locked.
public struct HandoffCodeRecord: Sendable {
    public var account: UUID
    public var clientID: String
    public var redirectURI: String
    public var codeChallenge: String
    public var expiresAt: Date
    public var redeemedAt: Date?
    /// The session its redemption started.
    public var session: UUID?
    /// The provider's session id of the login (`sid`), for the session it starts.
    public var providerSessionID: String?
}

/// The states of a login in flight: pending logins (until the callback) and handoff codes
/// (from the callback until the app redeems one). Each is consumed once.
public struct LoginStateStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// Stores a pending login, first removing a bounded batch (100) of expired ones, so that
    /// abandoned logins never pile up.
    public func begin(_ login: PendingLoginRecord) async throws {
        try await executor.query(
            """
            DELETE FROM pending_logins WHERE state_hash IN
              (SELECT state_hash FROM pending_logins WHERE expires_at <= \(login.createdAt) LIMIT 100)
            """
        )
        try await executor.query(
            """
            INSERT INTO pending_logins (state_hash, client_id, redirect_uri, app_state, code_challenge, provider,
              policy, nonce, code_verifier, key_id, issuer, created_at, expires_at, acr_values, max_age, step_up_account,
              step_up_resource)
            VALUES (\(login.stateHash), \(login.clientID), \(login.redirectURI), \(login.appState), \(login.codeChallenge),
              \(login.provider), \(login.policy), \(login.nonce), \(login.codeVerifier), \(login.keyID), \(login.issuer),
              \(login.createdAt), \(login.expiresAt), \(login.acrValues), \(login.maxAge), \(login.stepUpAccount),
              \(login.stepUpResource))
            """
        )
    }

    /// Removes and returns the pending login of `stateHash`, expired or not: one statement, so
    /// two callbacks racing with one state get it once.
    public func consume(stateHash: TokenHash) async throws -> PendingLoginRecord? {
        let rows = try await executor.query(
            """
            DELETE FROM pending_logins WHERE state_hash = \(stateHash)
            RETURNING client_id, redirect_uri, app_state, code_challenge, provider, policy, nonce, code_verifier, key_id, issuer,
              created_at, expires_at, acr_values, max_age, step_up_account, step_up_resource
            """
        )
        guard let row = rows.first else { return nil }
        return PendingLoginRecord(
            stateHash: stateHash,
            clientID: try row.value(String.self, "client_id"),
            redirectURI: try row.value(String.self, "redirect_uri"),
            appState: try row.value(String?.self, "app_state") ?? "",
            codeChallenge: try row.value(String.self, "code_challenge"),
            provider: try row.value(String.self, "provider"),
            policy: try row.value(String?.self, "policy"),
            nonce: try row.value(String.self, "nonce"),
            codeVerifier: try row.value(SealedBlob.self, "code_verifier"),
            keyID: try row.value(String.self, "key_id"),
            issuer: try row.value(String.self, "issuer"),
            createdAt: try row.value(Date.self, "created_at"),
            expiresAt: try row.value(Date.self, "expires_at"),
            acrValues: try row.value(String?.self, "acr_values"),
            maxAge: try row.value(Int?.self, "max_age"),
            stepUpAccount: try row.value(UUID?.self, "step_up_account"),
            stepUpResource: try row.value(String?.self, "step_up_resource")
        )
    }

    /// Removes up to `limit` expired pending logins.
    public func deleteExpiredLogins(now: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM pending_logins WHERE state_hash IN
              (SELECT state_hash FROM pending_logins WHERE expires_at <= \(now) LIMIT \(limit))
            """
        ).affectedRows
    }

    // MARK: - Handoff codes

    /// Stores a handoff code for `account`, for the app's client, redirect URI and challenge, with
    /// the provider's session id of the login (`sid`) when it has one.
    public func issueHandoff(
        codeHash: TokenHash,
        account: UUID,
        clientID: String,
        redirectURI: String,
        codeChallenge: String,
        providerSessionID: String? = nil,
        now: Date,
        expiresAt: Date
    ) async throws {
        try await executor.query(
            """
            INSERT INTO handoff_codes (code_hash, account_id, client_id, redirect_uri, code_challenge, provider_sid, created_at, expires_at)
            VALUES (\(codeHash), \(account), \(clientID), \(redirectURI), \(codeChallenge), \(providerSessionID), \(now), \(expiresAt))
            """
        )
    }

    /// The handoff code of `codeHash`, its row locked until the transaction ends.
    public func lockHandoff(codeHash: TokenHash) async throws -> HandoffCodeRecord? {
        let rows = try await executor.query(
            """
            SELECT account_id, client_id, redirect_uri, code_challenge, expires_at, redeemed_at, session_id, provider_sid
            FROM handoff_codes WHERE code_hash = \(codeHash) FOR UPDATE
            """
        )
        guard let row = rows.first else { return nil }
        return HandoffCodeRecord(
            account: try row.value(UUID.self, "account_id"),
            clientID: try row.value(String.self, "client_id"),
            redirectURI: try row.value(String.self, "redirect_uri"),
            codeChallenge: try row.value(String.self, "code_challenge"),
            expiresAt: try row.value(Date.self, "expires_at"),
            redeemedAt: try row.value(Date?.self, "redeemed_at"),
            session: try row.value(UUID?.self, "session_id"),
            providerSessionID: try row.value(String?.self, "provider_sid")
        )
    }

    /// Removes a handoff code (spent without a session).
    public func burnHandoff(codeHash: TokenHash) async throws {
        try await executor.query("DELETE FROM handoff_codes WHERE code_hash = \(codeHash)")
    }

    /// Marks a handoff code redeemed, with the session it started (a second presentation ends it).
    public func markRedeemed(codeHash: TokenHash, session: UUID, now: Date) async throws {
        try await executor.query("UPDATE handoff_codes SET redeemed_at = \(now), session_id = \(session) WHERE code_hash = \(codeHash)")
    }

    /// Removes the unredeemed handoff codes a provider's back-channel logout names (a login its
    /// user has meanwhile ended at the provider must not start a session). Returns how many.
    @discardableResult
    public func burnHandoffs(_ target: ProviderLogoutTarget) async throws -> Int {
        let accounts = target.accountCondition
        if let sessionID = target.sessionID {
            return try await executor.query(
                """
                DELETE FROM handoff_codes h USING accounts a
                WHERE a.id = h.account_id AND \(fragment: accounts) AND h.provider_sid = \(sessionID) AND h.redeemed_at IS NULL
                """
            ).affectedRows
        }
        return try await executor.query(
            """
            DELETE FROM handoff_codes h USING accounts a
            WHERE a.id = h.account_id AND \(fragment: accounts) AND h.redeemed_at IS NULL
            """
        ).affectedRows
    }

    /// Removes up to `limit` expired handoff codes.
    public func deleteExpiredHandoffs(now: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM handoff_codes WHERE code_hash IN
              (SELECT code_hash FROM handoff_codes WHERE expires_at <= \(now) LIMIT \(limit))
            """
        ).affectedRows
    }
}
