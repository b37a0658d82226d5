import Foundation
import Logging
import TGBase
import TGCrypto
import TGOIDC
import TGStore

/// What a back-channel logout ended.
public struct BackChannelLogoutResult: Sendable, Equatable {
    public var sessionsEnded: Int
    public var accountsRemoved: Int
    /// What became of each removed account's upstream refresh token.
    public var revocations: [UpstreamRevocation]
}

extension Logouts {
    /// Whether `provider` is configured and takes back-channel logout tokens (the route of any
    /// other name is not found).
    public func acceptsBackChannelLogout(provider: String) -> Bool {
        providers[provider]?.acceptsBackChannelLogout == true
    }

    /// Acts on a logout token the provider `provider` sent to its back-channel logout URI
    /// (OpenID Connect Back-Channel Logout 1.0 §2.5–2.7): validates it (``OpenIDProvider/validateLogoutToken(_:)``),
    /// accepts its `jti` once across every instance, and ends what it names: with a `sid`, the
    /// sessions that provider session started (of its `sub` only, when it has one too); with only
    /// a `sub`, every session of that account. Handoff codes of those logins not yet redeemed go
    /// too. Accounts left without a session are then removed with their grants, which go to the
    /// revocation queue and are revoked at the provider (the user signed out there: the refresh
    /// token must not outlive it). Ending sessions deletes their rows, so every instance drops
    /// what it cached through the invalidation feed. A token that matches nothing still counts
    /// as done (the user may have logged out of TokenGate already).
    ///
    /// Throws ``OAuthError`` `invalid_request` for an invalid or replayed token (400),
    /// `temporarily_unavailable` when the provider's keys cannot be fetched (503).
    public func backChannelLogout(provider name: String, logoutToken raw: String) async throws -> BackChannelLogoutResult {
        guard let provider = providers[name], provider.acceptsBackChannelLogout else {
            throw AuthProblem(.unknownProvider, "No provider of this name takes back-channel logout tokens.")
        }
        let token: LogoutToken
        do {
            token = try await provider.validateLogoutToken(raw)
        } catch {
            throw refusal(error, provider: name)
        }
        let target = ProviderLogoutTarget(provider: name, issuer: token.issuer, subject: token.subject, sessionID: token.sessionID)
        let ended: (sessions: [UUID], account: UUID?)? = try await store.transaction { transaction in
            // The id is recorded with what the token ends: a failure rolls both back, and the
            // provider's retry is not taken for a replay.
            guard try await transaction.logoutTokens.record(provider: name, tokenID: token.tokenID, until: token.replayWindowEnd) else {
                return nil
            }
            let sessions = try await transaction.sessions.end(.provider(target))
            try await transaction.loginStates.burnHandoffs(target)
            guard token.sessionID == nil, let subject = token.subject else { return (sessions, nil) }
            // Signed out of every session at the provider: the account goes even when no session
            // held it any more, and its grant with it.
            return (sessions, try await transaction.accounts.find(provider: name, issuer: token.issuer, subject: subject))
        }
        guard let ended else {
            metrics.backChannelLogout(provider: name, outcome: "replayed")
            logger.notice("back-channel logout token replayed", metadata: ["provider": .string(name)])
            throw OAuthError(.invalidRequest, "The logout token is not valid: \(LogoutTokenProblem.replayed).")
        }
        let sessionsEnded = ended.sessions.count
        let (removed, revocations) = await revocations.removeAccountsWithoutSessions(ended.sessions + (ended.account.map { [$0] } ?? []))
        metrics.backChannelLogout(provider: name, outcome: sessionsEnded + removed == 0 ? "no_match" : "ended")
        var metadata: Logger.Metadata = [
            "provider": .string(name),
            "by": .string([token.sessionID.map { _ in "sid" }, token.subject.map { _ in "sub" }].compactMap { $0 }.joined(separator: "+")),
            "sessions_ended": .stringConvertible(sessionsEnded),
            "accounts_removed": .stringConvertible(removed),
        ]
        // Enough to match the provider's own log line, not the session id itself.
        if let sessionID = token.sessionID { metadata["sid_hash"] = .string(Self.hashPrefix(sessionID)) }
        logger.notice("back-channel logout", metadata: metadata)
        return BackChannelLogoutResult(sessionsEnded: sessionsEnded, accountsRemoved: removed, revocations: revocations)
    }

    /// The answer to a token that could not be validated, logged and counted.
    private func refusal(_ error: OIDCError, provider name: String) -> OAuthError {
        switch error.kind {
        case .invalidLogoutToken(let problem):
            metrics.backChannelLogout(provider: name, outcome: "invalid")
            logger.warning("back-channel logout token refused", metadata: ["provider": .string(name), "reason": .string(problem.description)])
            return OAuthError(.invalidRequest, "The logout token is not valid: \(problem).")
        case .providerUnavailable(let retryAfter):
            metrics.backChannelLogout(provider: name, outcome: "unavailable")
            logger.warning("back-channel logout: the provider's keys cannot be fetched", metadata: ["provider": .string(name)])
            return OAuthError(
                .temporarilyUnavailable,
                "The provider's signing keys cannot be fetched right now; send the logout token again later.",
                retryAfter: Int(retryAfter?.components.seconds ?? 30)
            )
        default:
            metrics.backChannelLogout(provider: name, outcome: "unavailable")
            logger.error(
                "back-channel logout: the provider's metadata or keys are unusable",
                metadata: ["provider": .string(name), "reason": .string(error.description)]
            )
            return OAuthError(.temporarilyUnavailable, "The provider's metadata or keys are unusable; an operator has been told.", retryAfter: 60)
        }
    }

    /// The first 8 hex digits of the SHA-256 of `text`.
    static func hashPrefix(_ text: String) -> String {
        Hex.lowercase(Array(Digest.sha256(Array(text.utf8)).prefix(4)))
    }
}
