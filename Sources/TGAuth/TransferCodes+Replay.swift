import Foundation
import Logging
import TGBase
import TGStore

/// What a transfer code's redemption answered, sealed in the code's row for the replay grace
/// window (`sessions.refresh_replay_grace_seconds`, the refresh tokens' window): the app that lost
/// the answer, or sent its request twice, gets the same answer again with the same verifier.
struct TransferReplay: Codable {
    /// An account the redemption could not restore, as ``AccountToSignIn`` has it.
    struct SignIn: Codable {
        var accountID: UUID
        var provider: String?
        var loginHint: String?

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case provider
            case loginHint = "login_hint"
        }
    }

    /// Nil when nothing could move (the answer was `interaction_required`).
    var deviceSecret: String?
    var sessions: [IssuedTokens]
    var interactionRequired: [SignIn]
    /// The DPoP key the new sessions are bound to: the answer goes again only to a proof of it.
    var dpopJKT: String?

    enum CodingKeys: String, CodingKey {
        case deviceSecret = "device_secret"
        case sessions
        case interactionRequired = "interaction_required"
        case dpopJKT = "dpop_jkt"
    }

    init(deviceSecret: String?, sessions: [IssuedTokens], interactionRequired: [AccountToSignIn], dpopJKT: String?) {
        self.deviceSecret = deviceSecret
        self.sessions = sessions
        self.interactionRequired = interactionRequired.map {
            SignIn(accountID: $0.accountID, provider: $0.provider, loginHint: $0.loginHint)
        }
        self.dpopJKT = dpopJKT
    }

    /// The answer it keeps, as the redemption gave it.
    var outcome: RedemptionOutcome<TransferredDevice> {
        let toSignIn = interactionRequired.map { AccountToSignIn(accountID: $0.accountID, provider: $0.provider, loginHint: $0.loginHint) }
        guard let deviceSecret, !sessions.isEmpty else { return .refused(TransferCodes.nothingToTransfer(toSignIn)) }
        return .issued(TransferredDevice(deviceSecret: deviceSecret, sessions: sessions, interactionRequired: toSignIn), orphans: [])
    }
}

extension TransferCodes {
    /// The answer when none of the code's accounts can move: each of `toSignIn` needs a sign-in.
    static func nothingToTransfer(_ toSignIn: [AccountToSignIn]) -> OAuthError {
        var error = OAuthError(
            .interactionRequired,
            "None of the transfer code's accounts can be restored without signing in (their sessions ended or their providers "
                + "no longer honour the sign-in). Sign in again: interaction_required lists them."
        )
        error.members["interaction_required"] = .array(toSignIn.map(\.json))
        return error
    }

    /// `replay`, sealed under the context of the code's hash: a blob copied into another code's row
    /// does not open there.
    func sealTransferReplay(_ replay: TransferReplay, codeHash: TokenHash) throws -> SealedBlob {
        try vault.seal(
            String(decoding: try JSONEncoder().encode(replay), as: UTF8.self),
            context: TokenVault.Context.transferReplay(codeHash)
        )
    }

    /// A redeemed code presented again by its app with its verifier. Within the replay grace it
    /// is a retry (a lost answer, two requests racing): the same answer again, nothing changes.
    /// After it, someone else holds the code and its verifier: the sessions its redemption created end.
    func presentedAgain(
        _ code: TransferCodeRecord,
        redeemedAt: Date,
        codeHash: TokenHash,
        request: TransferRedemption,
        now: Date,
        in transaction: StoreTransaction
    ) async throws -> RedemptionOutcome<TransferredDevice> {
        if now.timeIntervalSince(redeemedAt) <= settings.refreshReplayGrace, let sealed = code.replay {
            let json = try vault.open(sealed, context: TokenVault.Context.transferReplay(codeHash))
            let replay = try JSONDecoder().decode(TransferReplay.self, from: Data(json.utf8))
            // Bound sessions' tokens go only to a proof of their key, as a refresh's kept answer does.
            if let bound = replay.dpopJKT, request.dpop?.jkt != bound { return .refused(DPoPBinding.otherDPoPKey) }
            try await dpop.recordProof(request.dpop, in: transaction)
            logger.info(
                "transfer code presented again within the replay grace: the same answer again",
                metadata: ["client_id": .string(request.clientID)]
            )
            metrics.transfer("replayed")
            return replay.outcome
        }
        var orphans: [UUID] = []
        if let device = code.redeemedDevice {
            orphans = try await transaction.sessions.end(.device(device))
            try await transaction.devices.delete(device)
        }
        logger.warning(
            "transfer code presented twice: the sessions its redemption created were ended",
            metadata: [
                "security_event": "transfer_code_reuse", "client_id": .string(request.clientID),
                "sessions_ended": .stringConvertible(orphans.count),
            ]
        )
        metrics.transfer("reused")
        return .refused(Self.unknownTransferCode, orphans: orphans)
    }
}
