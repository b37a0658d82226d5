import Foundation
import Logging
import TGBase
import TGStore

extension TokenGrants {
    /// Rotates a TokenGate refresh token (RFC 6749 §6, OAuth 2.0 Security BCP §4.14.2): a new
    /// pair every time; the previous token gets the same answer again for a short grace window (a
    /// retry after a lost response, or two requests racing); any older token of the family, or
    /// the previous one after the window, is reuse and ends the whole family.
    ///
    /// A session bound to a DPoP key refreshes only with a proof of that key (`dpop`, verified,
    /// recorded once the refresh token is found good), even after its app's `dpop` was turned
    /// `off`; without a proof there, the session ends (`invalid_grant`: sign in again). An
    /// unbound session of an app that uses DPoP is bound by a refresh that brings a proof.
    public func refresh(refreshToken: String, clientID: String, dpop: DPoPProof? = nil) async throws -> IssuedTokens {
        guard clients[clientID] != nil else { throw OAuthError(.invalidClient, "client_id names no registered app.") }
        guard let hash = OpaqueToken.hashIfWellFormed(refreshToken) else { throw Self.deadRefreshToken }
        let now = clock.now()
        let outcome = try await store.transaction { transaction in
            try await rotate(hash, clientID: clientID, proof: dpop, now: now, in: transaction)
        }
        return try await revocations.finish(outcome)
    }

    static let deadRefreshToken = OAuthError(.invalidGrant, "The refresh token is not valid any more. Log in again.")
    static let unboundApp = OAuthError(
        .invalidGrant,
        "This session's tokens were bound to a DPoP key, and this app no longer uses DPoP; the session has ended. Log in again."
    )

    private func rotate(
        _ hash: TokenHash,
        clientID: String,
        proof: DPoPProof?,
        now: Date,
        in transaction: StoreTransaction
    ) async throws -> RedemptionOutcome<IssuedTokens> {
        if let current = try await transaction.sessions.lockForRefresh(refreshTokenHash: hash) {
            let account = AccountSummary(stored: current.account)
            guard current.clientID == clientID else { return .refused(Self.deadRefreshToken) }
            guard current.expiresAt > now, current.absoluteExpiresAt > now, current.account.state == "active" else {
                try await transaction.sessions.end(.session(current.id))
                return .refused(Self.deadRefreshToken, orphans: [account.id])
            }
            let jkt: String?
            if let bound = current.dpopJKT {
                if proof == nil, clients[clientID]?.dpop == .off {
                    // Bound before the app's DPoP was turned off, and the app sends no proof any
                    // more: the binding cannot be honoured, so the session ends cleanly.
                    try await transaction.sessions.end(.session(current.id))
                    return .refused(Self.unboundApp, orphans: [account.id])
                }
                guard proof?.jkt == bound else { return .refused(DPoPBinding.otherDPoPKey) }
                jkt = bound
            } else {
                jkt = try dpop.bindingKey(proof?.jkt, client: clientID)
            }
            try await dpop.recordProof(proof, in: transaction)
            let access = OpaqueToken.mint()
            let refresh = OpaqueToken.mint()
            let tokens = IssuedTokens(
                accessToken: access.value,
                tokenType: DPoPBinding.tokenType(jkt),
                expiresIn: Int(settings.accessTokenTTL),
                refreshToken: refresh.value,
                account: account
            )
            let replay = try vault.seal(
                String(decoding: try JSONEncoder().encode(tokens), as: UTF8.self),
                context: TokenVault.Context.replay(current.id)
            )
            try await transaction.sessions.rotate(
                SessionRotation(
                    session: current.id,
                    familyID: current.familyID,
                    accessTokenHash: access.hash,
                    accessExpiresAt: now.addingTimeInterval(settings.accessTokenTTL),
                    refreshTokenHash: refresh.hash,
                    spentRefreshTokenHash: hash,
                    absoluteExpiresAt: current.absoluteExpiresAt,
                    replay: replay,
                    idleExpiresAt: now.addingTimeInterval(settings.sessionIdleTTL),
                    now: now,
                    dpopJKT: jkt
                )
            )
            try await transaction.accounts.touch(account.id, now: now)
            // A device in use keeps its secret alive (sessions.device_idle_ttl_seconds).
            try await transaction.devices.touch(deviceOfSession: current.id, now: now)
            return .issued(tokens, orphans: [])
        }
        if let previous = try await transaction.sessions.lockByPreviousRefreshToken(hash) {
            // A bound session's kept answer goes only to a proof of its key, as a refresh would.
            if let bound = previous.dpopJKT, proof?.jkt != bound { return .refused(DPoPBinding.otherDPoPKey) }
            if previous.clientID == clientID, let rotatedAt = previous.rotatedAt,
                now.timeIntervalSince(rotatedAt) <= settings.refreshReplayGrace, let sealed = previous.replay
            {
                try await dpop.recordProof(proof, in: transaction)
                let json = try vault.open(sealed, context: TokenVault.Context.replay(previous.id))
                return .issued(try JSONDecoder().decode(IssuedTokens.self, from: Data(json.utf8)), orphans: [])
            }
            return try await revokeFamily(previous.familyID, in: transaction)
        }
        if let family = try await transaction.sessions.revokedFamily(refreshTokenHash: hash) {
            return try await revokeFamily(family, in: transaction)
        }
        return .refused(Self.deadRefreshToken)
    }

    /// A rotated-away refresh token came back: someone holds a copy. Every session of the family
    /// ends. When none is left (logged out, expired), it is only a dead token, not an alarm.
    private func revokeFamily(_ family: UUID, in transaction: StoreTransaction) async throws -> RedemptionOutcome<IssuedTokens> {
        let ended = try await transaction.sessions.end(.family(family))
        if ended.isEmpty {
            logger.info("a refresh token of a session that has ended was presented")
            return .refused(Self.deadRefreshToken)
        }
        logger.warning("refresh token reuse: the token family was revoked", metadata: ["sessions_ended": .stringConvertible(ended.count)])
        return .refused(Self.deadRefreshToken, orphans: ended)
    }
}
