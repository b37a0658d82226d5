import Foundation
public import Logging
public import TGBase
import TGCrypto
import TGOIDC
public import TGStore

/// The app's `grant_type=authorization_code` request (RFC 6749 §4.1.3, RFC 7636 §4.5).
public struct HandoffRedemption: Sendable {
    public var code: String
    public var codeVerifier: String
    public var redirectURI: String
    public var clientID: String
    /// The device's secret from an earlier answer: adds this account to that device.
    public var deviceSecret: String?
    /// The request's verified DPoP proof, if it had one: recorded once the code is found good.
    public var dpop: DPoPProof?

    public init(
        code: String,
        codeVerifier: String,
        redirectURI: String,
        clientID: String,
        deviceSecret: String? = nil,
        dpop: DPoPProof? = nil
    ) {
        self.code = code
        self.codeVerifier = codeVerifier
        self.redirectURI = redirectURI
        self.clientID = clientID
        self.deviceSecret = deviceSecret
        self.dpop = dpop
    }
}

/// The token endpoint's grants of TokenGate's own tokens (RFC 6749 §4.1.3 and §6, RFC 8693):
/// handoff codes, refresh tokens and token exchange.
public final class TokenGrants: Sendable {
    let store: Store
    let vault: TokenVault
    let clients: [String: AppClient]
    /// The APIs whose tokens apps may ask for, by name (`resource=` of a token exchange).
    let resources: [String: UpstreamResource]
    let settings: AuthSettings
    let dpop: DPoPBinding
    let upstream: UpstreamTokens
    let revocations: RevocationQueue
    let clock: WallClock
    let logger: Logger

    public init(
        store: Store,
        vault: TokenVault,
        clients: [String: AppClient],
        resources: [String: UpstreamResource],
        settings: AuthSettings,
        dpop: DPoPBinding,
        upstream: UpstreamTokens,
        revocations: RevocationQueue,
        clock: WallClock = .system,
        logger: Logger
    ) {
        self.store = store
        self.vault = vault
        self.clients = clients
        self.resources = resources
        self.settings = settings
        self.dpop = dpop
        self.upstream = upstream
        self.revocations = revocations
        self.clock = clock
        self.logger = logger
    }

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
        let jkt = try dpop.bindingKey(request.dpop?.jkt, client: request.clientID)
        let now = clock.now()
        let outcome = try await store.transaction { transaction in
            try await redeem(request, codeHash: codeHash, deviceHash: deviceHash, jkt: jkt, now: now, in: transaction)
        }
        return try await revocations.finish(outcome)
    }

    private func redeem(
        _ request: HandoffRedemption,
        codeHash: TokenHash,
        deviceHash: TokenHash?,
        jkt: String?,
        now: Date,
        in transaction: StoreTransaction
    ) async throws -> RedemptionOutcome<IssuedTokens> {
        let unknown = OAuthError(.invalidGrant, "The code is unknown, expired or already used. Log in again.")
        let codes = transaction.loginStates
        guard let code = try await codes.lockHandoff(codeHash: codeHash) else { return .refused(unknown) }
        if code.redeemedAt != nil {
            var orphans: [UUID] = []
            if let session = code.session {
                orphans = try await transaction.sessions.end(.session(session))
            }
            logger.warning("handoff code presented twice: its session was ended", metadata: ["client_id": .string(request.clientID)])
            return .refused(unknown, orphans: orphans)
        }
        // From here on the code is spent, whatever the outcome.
        guard code.expiresAt > now, code.clientID == request.clientID, code.redirectURI == request.redirectURI else {
            try await codes.burnHandoff(codeHash: codeHash)
            return .refused(unknown)
        }
        guard Digest.constantTimeEqual(Array(PKCE.challenge(for: request.codeVerifier).utf8), Array(code.codeChallenge.utf8)) else {
            try await codes.burnHandoff(codeHash: codeHash)
            return .refused(OAuthError(.invalidGrant, "code_verifier does not match the code_challenge of the login."))
        }
        let accountID = code.account
        guard let stored = try await transaction.accounts.findActive(accountID) else {
            try await codes.burnHandoff(codeHash: codeHash)
            return .refused(unknown)
        }
        let account = AccountSummary(stored: stored)
        // The device: the one the secret names (this app's only), or a new one.
        var newDeviceSecret: OpaqueToken?
        let device: UUID
        if let deviceHash {
            guard
                let found = try await transaction.devices.touch(
                    secretHash: deviceHash,
                    client: request.clientID,
                    seenSince: now.addingTimeInterval(-settings.deviceIdleTTL),
                    now: now
                )
            else {
                try await codes.burnHandoff(codeHash: codeHash)
                return .refused(
                    OAuthError(.invalidGrant, "device_secret is not valid for this app, or has not been used for too long; log in without it.")
                )
            }
            device = found
        } else {
            let secret = OpaqueToken.mint()
            device = try await transaction.devices.create(secretHash: secret.hash, client: request.clientID, now: now)
            newDeviceSecret = secret
        }
        try await dpop.recordProof(request.dpop, in: transaction)
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
                now: now,
                dpopJKT: jkt,
                providerSessionID: code.providerSessionID
            )
        )
        try await codes.markRedeemed(codeHash: codeHash, session: session, now: now)
        try await transaction.accounts.touch(accountID, now: now)
        let tokens = IssuedTokens(
            accessToken: access.value,
            tokenType: DPoPBinding.tokenType(jkt),
            expiresIn: Int(settings.accessTokenTTL),
            refreshToken: refresh.value,
            account: account,
            deviceSecret: newDeviceSecret?.value
        )
        return .issued(tokens, orphans: orphans.filter { $0 != accountID })
    }
}

/// What a grant's transaction decided, answered once it has committed.
enum RedemptionOutcome<Answer> {
    case issued(Answer, orphans: [UUID])
    /// Refused, with what was changed (a burnt code, an ended session) still committed, and
    /// the accounts whose sessions ended.
    case refused(OAuthError, orphans: [UUID] = [])
}

extension RevocationQueue {
    /// Removes the accounts a grant left without a session, then answers.
    func finish<Answer>(_ outcome: RedemptionOutcome<Answer>) async throws -> Answer {
        switch outcome {
        case .issued(let tokens, let orphans):
            await removeAccountsWithoutSessions(orphans)
            return tokens
        case .refused(let error, let orphans):
            await removeAccountsWithoutSessions(orphans)
            throw error
        }
    }
}
