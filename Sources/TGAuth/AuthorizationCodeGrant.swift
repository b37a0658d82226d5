import Foundation
import Logging
import TGBase
import TGCrypto
import TGOIDC
import TGPostgres
import TGStore

/// The app's `grant_type=authorization_code` request (RFC 6749 §4.1.3, RFC 7636 §4.5).
public struct HandoffRedemption: Sendable {
    public var code: String
    public var codeVerifier: String
    public var redirectURI: String
    public var clientID: String
    /// The device's secret from an earlier answer: adds this account to that device.
    public var deviceSecret: String?

    public init(code: String, codeVerifier: String, redirectURI: String, clientID: String, deviceSecret: String? = nil) {
        self.code = code
        self.codeVerifier = codeVerifier
        self.redirectURI = redirectURI
        self.clientID = clientID
        self.deviceSecret = deviceSecret
    }
}

extension AuthService {
    /// Redeems a handoff code for TokenGate tokens: once, by the client and redirect URI it was
    /// issued to, with the verifier of the app's challenge. Presenting a used code again ends the
    /// session it started (RFC 6749 §4.1.2).
    public func redeemHandoff(_ request: HandoffRedemption) async throws -> IssuedTokens {
        guard clients[request.clientID] != nil else {
            throw OAuthError(.invalidClient, "client_id names no registered app.")
        }
        guard let codeHash = OpaqueToken.hashIfWellFormed(request.code) else {
            throw OAuthError(.invalidGrant, "The code is unknown, expired or already used. Log in again.")
        }
        guard Syntax.isCodeVerifier(request.codeVerifier) else {
            throw OAuthError(.invalidRequest, "code_verifier must be 43 to 128 unreserved characters (RFC 7636).")
        }
        var deviceHash: TokenHash?
        if let secret = request.deviceSecret {
            guard let hash = OpaqueToken.hashIfWellFormed(secret) else {
                throw OAuthError(.invalidGrant, "device_secret is not valid for this app.")
            }
            deviceHash = hash
        }
        let now = clock.now()
        let outcome = try await store.transaction { transaction in
            try await redeem(request, codeHash: codeHash, deviceHash: deviceHash, now: now, in: transaction)
        }
        return try await finish(outcome)
    }

    /// Removes the accounts the grant left without a session, then answers.
    func finish(_ outcome: RedemptionOutcome) async throws -> IssuedTokens {
        switch outcome {
        case .issued(let tokens, let orphans):
            await removeAccountsWithoutSessions(orphans)
            return tokens
        case .refused(let error, let orphans):
            await removeAccountsWithoutSessions(orphans)
            throw error
        }
    }

    enum RedemptionOutcome {
        case issued(IssuedTokens, orphans: [UUID])
        /// Refused, with what was changed (a burnt code, an ended session) still committed, and
        /// the accounts whose sessions ended.
        case refused(OAuthError, orphans: [UUID] = [])
    }

    private func redeem(
        _ request: HandoffRedemption,
        codeHash: TokenHash,
        deviceHash: TokenHash?,
        now: Date,
        in transaction: StoreTransaction
    ) async throws -> RedemptionOutcome {
        let connection = transaction.connection
        let unknown = OAuthError(.invalidGrant, "The code is unknown, expired or already used. Log in again.")
        let rows = try await connection.query(
            """
            SELECT account_id, client_id, redirect_uri, code_challenge, expires_at, redeemed_at, session_id
            FROM handoff_codes WHERE code_hash = \(codeHash) FOR UPDATE
            """
        )
        guard let row = rows.first else { return .refused(unknown) }
        if try row.decode(Date?.self, "redeemed_at") != nil {
            var orphans: [UUID] = []
            if let session = try row.decode(UUID?.self, "session_id") {
                orphans = try await transaction.sessions.end(.session(session))
            }
            logger.warning("handoff code presented twice: its session was ended", metadata: ["client_id": .string(request.clientID)])
            return .refused(unknown, orphans: orphans)
        }
        // From here on the code is spent, whatever the outcome.
        let burn: PostgresQuery = "DELETE FROM handoff_codes WHERE code_hash = \(codeHash)"
        guard try row.decode(Date.self, "expires_at") > now,
            try row.decode(String.self, "client_id") == request.clientID,
            try row.decode(String.self, "redirect_uri") == request.redirectURI
        else {
            try await connection.query(burn)
            return .refused(unknown)
        }
        let challenge = Array(try row.decode(String.self, "code_challenge").utf8)
        guard Digest.constantTimeEqual(Array(PKCE.challenge(for: request.codeVerifier).utf8), challenge) else {
            try await connection.query(burn)
            return .refused(OAuthError(.invalidGrant, "code_verifier does not match the code_challenge of the login."))
        }
        let accountID = try row.decode(UUID.self, "account_id")
        let accountRows = try await connection.query(
            """
            SELECT id, provider, issuer, subject, tenant, claims::text AS claims FROM accounts
            WHERE id = \(accountID) AND state = 'active'
            """
        )
        guard let accountRow = accountRows.first else {
            try await connection.query(burn)
            return .refused(unknown)
        }
        let account = try AccountSummary(row: accountRow)
        // The device: the one the secret names (this app's only), or a new one.
        var newDeviceSecret: OpaqueToken?
        let device: UUID
        if let deviceHash {
            let devices = try await connection.query(
                """
                UPDATE devices SET last_seen_at = \(now) WHERE secret_hash = \(deviceHash) AND client_id = \(request.clientID)
                  AND last_seen_at > \(now.addingTimeInterval(-settings.deviceIdleTTL))
                RETURNING id
                """
            )
            guard let found = devices.first else {
                try await connection.query(burn)
                return .refused(
                    OAuthError(.invalidGrant, "device_secret is not valid for this app, or has not been used for too long; log in without it.")
                )
            }
            device = try found.decode(UUID.self, "id")
        } else {
            let secret = OpaqueToken.mint()
            let created = try await connection.query(
                """
                INSERT INTO devices (secret_hash, client_id, created_at, last_seen_at)
                VALUES (\(secret.hash), \(request.clientID), \(now), \(now)) RETURNING id
                """
            )
            device = try created.first!.decode(UUID.self, "id")
            newDeviceSecret = secret
        }
        let orphans = try await transaction.sessions.endStale(onDevice: device, now: now)
        let access = OpaqueToken.mint()
        let refresh = OpaqueToken.mint()
        let session = try await transaction.sessions.start(
            SessionStore.Start(
                device: device,
                account: accountID,
                clientID: request.clientID,
                accessTokenHash: access.hash,
                accessExpiresAt: now.addingTimeInterval(settings.accessTokenTTL),
                refreshTokenHash: refresh.hash,
                expiresAt: now.addingTimeInterval(settings.sessionIdleTTL),
                absoluteExpiresAt: now.addingTimeInterval(settings.sessionAbsoluteTTL),
                now: now
            )
        )
        try await connection.query(
            "UPDATE handoff_codes SET redeemed_at = \(now), session_id = \(session) WHERE code_hash = \(codeHash)"
        )
        try await connection.query("UPDATE accounts SET last_used_at = \(now) WHERE id = \(accountID)")
        let tokens = IssuedTokens(
            accessToken: access.value,
            expiresIn: Int(settings.accessTokenTTL),
            refreshToken: refresh.value,
            account: account,
            deviceSecret: newDeviceSecret?.value
        )
        return .issued(tokens, orphans: orphans.filter { $0 != accountID })
    }
}
