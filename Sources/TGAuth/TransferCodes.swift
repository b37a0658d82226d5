public import Foundation
public import Logging
public import TGBase
import TGCrypto
import TGOIDC
public import TGStore

/// A transfer code as the app receives it (`POST /auth/transfer`).
public struct IssuedTransferCode: Sendable, Encodable, Equatable {
    public var transferCode: String
    public var expiresIn: Int
    /// The accounts it can restore (the device's when it was issued), as ids.
    public var accounts: [String]

    enum CodingKeys: String, CodingKey {
        case transferCode = "transfer_code"
        case expiresIn = "expires_in"
        case accounts
    }
}

/// The app's `grant_type=urn:tokengate:params:oauth:grant-type:transfer-code` request.
public struct TransferRedemption: Sendable {
    public static let grantType = "urn:tokengate:params:oauth:grant-type:transfer-code"

    public var transferCode: String
    public var codeVerifier: String
    public var clientID: String
    /// The request's verified DPoP proof: the new sessions are bound to its key when the app
    /// uses DPoP; it is recorded once the code and verifier are found good.
    public var dpop: DPoPProof?

    public init(transferCode: String, codeVerifier: String, clientID: String, dpop: DPoPProof? = nil) {
        self.transferCode = transferCode
        self.codeVerifier = codeVerifier
        self.clientID = clientID
        self.dpop = dpop
    }
}

/// What a redeemed transfer code gives the fresh install: a new device with a session per
/// restored account. Encoded as a token response (RFC 6749 §5.1) for the first account, with the
/// new `device_secret`, every account's tokens under `accounts`, and the accounts that need a new
/// sign-in under `interaction_required`.
public struct TransferredDevice: Sendable, Encodable, Equatable {
    public var deviceSecret: String
    /// One per restored account, in the order they signed in on the old device.
    public var sessions: [IssuedTokens]
    /// The code's accounts that could not be restored without a new sign-in.
    public var interactionRequired: [AccountToSignIn]

    enum CodingKeys: String, CodingKey {
        case deviceSecret = "device_secret"
        case accounts
        case interactionRequired = "interaction_required"
    }

    public func encode(to encoder: any Encoder) throws {
        if let first = sessions.first { try first.encode(to: encoder) }
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(deviceSecret, forKey: .deviceSecret)
        try c.encode(sessions, forKey: .accounts)
        try c.encode(interactionRequired, forKey: .interactionRequired)
    }
}

/// An account a transfer could not restore: its session on the old device had ended, or its
/// provider grant is gone. The app starts a login for it (`login_endpoint`, `provider`, `login_hint`).
public struct AccountToSignIn: Sendable, Encodable, Equatable {
    public var accountID: UUID
    public var provider: String?
    public var loginHint: String?

    enum CodingKeys: String, CodingKey {
        case accountID = "account_id"
        case provider
        case loginHint = "login_hint"
        case error
        case loginEndpoint = "login_endpoint"
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(accountID.uuidString.lowercased(), forKey: .accountID)
        try c.encodeIfPresent(provider, forKey: .provider)
        try c.encodeIfPresent(loginHint, forKey: .loginHint)
        try c.encode("interaction_required", forKey: .error)
        try c.encode("/auth/login", forKey: .loginEndpoint)
    }

    var json: JSONValue {
        var members: [String: JSONValue] = [
            "account_id": .string(accountID.uuidString.lowercased()), "error": .string("interaction_required"),
            "login_endpoint": .string("/auth/login"),
        ]
        if let provider { members["provider"] = .string(provider) }
        if let loginHint { members["login_hint"] = .string(loginHint) }
        return .object(members)
    }
}

/// Transfer codes: a device's accounts moved to a fresh install without a provider login.
public final class TransferCodes: Sendable {
    let store: Store
    let vault: TokenVault
    let clients: [String: AppClient]
    let settings: AuthSettings
    let dpop: DPoPBinding
    let revocations: RevocationQueue
    let clock: WallClock
    let metrics: AuthMetrics
    let logger: Logger

    public init(
        store: Store,
        vault: TokenVault,
        clients: [String: AppClient],
        settings: AuthSettings,
        dpop: DPoPBinding,
        revocations: RevocationQueue,
        clock: WallClock = .system,
        metrics: AuthMetrics = AuthMetrics(),
        logger: Logger
    ) {
        self.store = store
        self.vault = vault
        self.clients = clients
        self.settings = settings
        self.dpop = dpop
        self.revocations = revocations
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    /// A wrong verifier or client this many times kills the code (the verifier has 256 bits: a
    /// guess never succeeds, and a code under attack should not stay usable).
    static let transferMaxFailedAttempts = 5

    /// Issues a transfer code for the caller's device: bound to the device's accounts now and to
    /// the S256 `codeChallenge` of a verifier the app keeps beside it. The device keeps at most
    /// ``AuthSettings/transferCodesPerDevice`` live codes; a new one retires the oldest.
    public func issueTransferCode(_ context: SessionContext, codeChallenge: String, method: String?) async throws -> IssuedTransferCode {
        guard settings.transferCodesPerDevice > 0 else { throw Self.transferDisabled }
        guard method == "S256" else {
            throw AuthProblem(.invalidRequest, "code_challenge_method must be S256 (RFC 7636): send the SHA-256 of a verifier you keep.")
        }
        guard Syntax.isS256Challenge(codeChallenge) else {
            throw AuthProblem(.invalidRequest, "code_challenge must be the 43-character base64url SHA-256 of a code verifier (RFC 7636).")
        }
        let now = clock.now()
        let accounts = try await store.sessions.accounts(onDevice: context.deviceID, now: now).map(\.id)
        let code = OpaqueToken.mint()
        try await store.transaction { transaction in
            try await transaction.transferCodes.issue(
                codeHash: code.hash,
                clientID: context.clientID,
                device: context.deviceID,
                accounts: accounts,
                codeChallenge: codeChallenge,
                now: now,
                expiresAt: now.addingTimeInterval(settings.transferCodeTTL),
                limit: settings.transferCodesPerDevice
            )
        }
        metrics.transfer("issued")
        return IssuedTransferCode(
            transferCode: code.value,
            expiresIn: Int(settings.transferCodeTTL),
            accounts: accounts.map { $0.uuidString.lowercased() }
        )
    }

    /// Revokes the caller's device's unredeemed transfer codes; returns how many there were.
    public func revokeTransferCodes(_ context: SessionContext) async throws -> Int {
        try await store.transferCodes.revoke(device: context.deviceID)
    }

    static let transferDisabled = AuthProblem(
        .transferDisabled,
        "Transfer codes are turned off on this TokenGate (sessions.transfer_codes_per_device is 0)."
    )

    /// Redeems a transfer code on a fresh install: once, by its app, with the verifier of its
    /// challenge. The code's accounts whose session on the old device is live and whose grant is
    /// stored move to a new device (new `device_secret`, new sessions keeping their login's
    /// absolute expiry; no provider login); the old device's sessions end and the device goes.
    /// A redeemed code counts only with its app and verifier: then within the replay grace it is a
    /// retry and gets the same answer again, and after it, theft: the sessions its redemption
    /// created end. With a wrong verifier or app it is refused and changes nothing.
    public func redeemTransferCode(_ request: TransferRedemption) async throws -> TransferredDevice {
        guard clients[request.clientID] != nil else { throw OAuthError(.invalidClient, "client_id names no registered app.") }
        guard settings.transferCodesPerDevice > 0 else {
            throw OAuthError(.unsupportedGrantType, "Transfer codes are turned off on this TokenGate.")
        }
        guard let codeHash = OpaqueToken.hashIfWellFormed(request.transferCode) else { throw Self.unknownTransferCode }
        guard Syntax.isCodeVerifier(request.codeVerifier) else {
            throw OAuthError(.invalidRequest, "code_verifier must be 43 to 128 unreserved characters (RFC 7636).")
        }
        let jkt = try dpop.bindingKey(request.dpop?.jkt, client: request.clientID)
        let now = clock.now()
        let outcome = try await store.transaction { transaction in
            try await redeem(request, codeHash: codeHash, jkt: jkt, now: now, in: transaction)
        }
        return try await revocations.finish(outcome)
    }

    static let unknownTransferCode = OAuthError(
        .invalidGrant,
        "The transfer code is unknown, expired or already used. Sign in again."
    )

    static let wrongTransferVerifier = OAuthError(
        .invalidGrant,
        "code_verifier does not match the transfer code's challenge, or the code belongs to another app."
    )

    private func redeem(
        _ request: TransferRedemption,
        codeHash: TokenHash,
        jkt: String?,
        now: Date,
        in transaction: StoreTransaction
    ) async throws -> RedemptionOutcome<TransferredDevice> {
        let codes = transaction.transferCodes
        guard let code = try await codes.lock(codeHash: codeHash), code.expiresAt > now else {
            metrics.transfer("refused")
            return .refused(Self.unknownTransferCode)
        }
        let challenge = Array(PKCE.challenge(for: request.codeVerifier).utf8)
        guard code.clientID == request.clientID, Digest.constantTimeEqual(challenge, Array(code.codeChallenge.utf8)) else {
            metrics.transfer("refused")
            // A redeemed code is spent: without its verifier it can neither be retried nor end
            // anything, so the attempt is not even counted.
            guard code.redeemedAt == nil else { return .refused(Self.wrongTransferVerifier) }
            let usable = try await codes.recordFailedAttempt(codeHash: codeHash, maxAttempts: Self.transferMaxFailedAttempts)
            return .refused(
                usable
                    ? Self.wrongTransferVerifier
                    : OAuthError(.invalidGrant, "The transfer code was presented with a wrong verifier too often and is now dead. Sign in again.")
            )
        }
        if let redeemedAt = code.redeemedAt {
            return try await presentedAgain(code, redeemedAt: redeemedAt, codeHash: codeHash, request: request, now: now, in: transaction)
        }
        try await dpop.recordProof(request.dpop, in: transaction)
        // From here on the code is spent, whatever the outcome.
        var moving: [TransferableSession] = []
        var orphans: [UUID] = []
        if let oldDevice = code.device {
            moving = try await codes.transferable(accounts: code.accounts, device: oldDevice, now: now)
            try await codes.revoke(device: oldDevice, except: codeHash)
            orphans = try await transaction.sessions.end(.device(oldDevice))
            try await transaction.devices.delete(oldDevice)
        }
        let restored = Set(moving.map(\.account.id))
        let others = code.accounts.filter { !restored.contains($0) }
        let known = Dictionary(uniqueKeysWithValues: try await transaction.accounts.find(others).map { ($0.id, AccountSummary(stored: $0)) })
        let toSignIn = others.map { id in
            AccountToSignIn(accountID: id, provider: known[id]?.provider, loginHint: known[id].flatMap { $0.email ?? $0.preferredUsername })
        }
        guard !moving.isEmpty else {
            let replay = TransferReplay(deviceSecret: nil, sessions: [], interactionRequired: toSignIn, dpopJKT: jkt)
            try await codes.markRedeemed(codeHash: codeHash, newDevice: nil, replay: try sealTransferReplay(replay, codeHash: codeHash), now: now)
            metrics.transfer("interaction_required")
            return .refused(Self.nothingToTransfer(toSignIn), orphans: orphans)
        }
        let secret = OpaqueToken.mint()
        let device = try await transaction.devices.create(secretHash: secret.hash, client: request.clientID, now: now)
        var sessions: [IssuedTokens] = []
        for session in moving {
            let access = OpaqueToken.mint()
            let refresh = OpaqueToken.mint()
            _ = try await transaction.sessions.start(
                SessionStore.Start(
                    device: device,
                    account: session.account.id,
                    clientID: request.clientID,
                    accessTokenHash: access.hash,
                    accessExpiresAt: min(now.addingTimeInterval(settings.accessTokenTTL), session.absoluteExpiresAt),
                    refreshTokenHash: refresh.hash,
                    expiresAt: min(now.addingTimeInterval(settings.sessionIdleTTL), session.absoluteExpiresAt),
                    absoluteExpiresAt: session.absoluteExpiresAt,
                    now: now,
                    createdAt: session.createdAt,
                    dpopJKT: jkt,
                    providerSessionID: session.providerSessionID
                )
            )
            try await transaction.accounts.touch(session.account.id, now: now)
            sessions.append(
                IssuedTokens(
                    accessToken: access.value,
                    tokenType: DPoPBinding.tokenType(jkt),
                    expiresIn: Int(min(settings.accessTokenTTL, session.absoluteExpiresAt.timeIntervalSince(now))),
                    refreshToken: refresh.value,
                    account: AccountSummary(stored: session.account)
                )
            )
        }
        let replay = TransferReplay(deviceSecret: secret.value, sessions: sessions, interactionRequired: toSignIn, dpopJKT: jkt)
        try await codes.markRedeemed(codeHash: codeHash, newDevice: device, replay: try sealTransferReplay(replay, codeHash: codeHash), now: now)
        logger.notice(
            "transfer code redeemed: sessions moved to a new device",
            metadata: ["client_id": .string(request.clientID), "accounts": .stringConvertible(sessions.count)]
        )
        metrics.transfer("redeemed")
        let answer = TransferredDevice(deviceSecret: secret.value, sessions: sessions, interactionRequired: toSignIn)
        return .issued(answer, orphans: orphans.filter { !restored.contains($0) })
    }
}
