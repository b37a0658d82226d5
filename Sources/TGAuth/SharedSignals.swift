import Foundation
import Logging
import TGBase
import TGOIDC
import TGStore

extension Logouts {
    /// Whether `provider` is configured and takes security event tokens (shared signals are off
    /// unless configured; the route of any other name is not found).
    public func acceptsSecurityEvents(provider: String) -> Bool {
        providers[provider]?.acceptsSecurityEvents == true
    }

    /// Acts on a security event token the provider `provider` pushed (RFC 8935, OpenID Shared
    /// Signals Framework 1.0): validates it (``OpenIDProvider/validateSecurityEventToken(_:)``),
    /// accepts its `jti` once across every instance, and does what each event asks
    /// (``SecurityEventType/action``) for its subject, among that provider's accounts only:
    /// sessions end as a back-channel logout naming only `sub` ends them (the same store calls,
    /// so whatever follows the end of a session follows these too), accounts left without a
    /// session are removed with their grants, which are revoked at the provider; the events that
    /// revoke the grant remove the account even when no session held it; `token-claims-change`
    /// deletes the account's upstream access tokens, whose deletion tells every instance to drop
    /// them, so the next API call refreshes. Verification events, event types TokenGate does not
    /// know and subjects it cannot map to an account are acknowledged and logged.
    ///
    /// `authorization` is the request's `Authorization` header: when the provider's settings
    /// name one, nothing of the token is read unless it is that (compared in constant time).
    ///
    /// A token whose `jti` was acted on before is acknowledged and not acted on again.
    /// Throws ``SecurityEventRefusal`` for an unauthenticated push, an invalid token
    /// (400), ``OAuthError`` `temporarily_unavailable` when the provider's keys cannot be fetched (503).
    public func receiveSecurityEvent(provider name: String, token raw: String, authorization: String?) async throws -> SecurityEventResult {
        guard let provider = providers[name], provider.acceptsSecurityEvents, let settings = provider.configuration.securityEvents else {
            throw AuthProblem(.unknownProvider, "No provider of this name takes security event tokens.")
        }
        guard settings.authorizes(authorization) else {
            metrics.securityEventToken(provider: name, outcome: "unauthenticated")
            logger.warning("security event push without the configured authorization", metadata: ["provider": .string(name)])
            throw SecurityEventRefusal(
                .authenticationFailed,
                "The push lacks the Authorization header configured for this stream (shared_signals_authorization)."
            )
        }
        let token: SecurityEventToken
        do {
            token = try await provider.validateSecurityEventToken(raw)
        } catch {
            throw securityEventRefusal(error, provider: name)
        }
        typealias Applied = (result: SecurityEventResult, ended: [UUID], dropped: [UUID])
        let applied: Applied? = try await store.transaction { transaction in
            // The id is recorded with what the events do: a failure rolls both back, and the
            // transmitter's retry is not taken for a replay.
            guard try await transaction.securityEvents.record(provider: name, tokenID: token.tokenID, until: token.replayWindowEnd) else {
                return nil
            }
            var applied: Applied = (SecurityEventResult(), [], [])
            for uri in token.events.keys.sorted() {
                let type = SecurityEventType(rawValue: uri)
                let label = type?.label ?? SecurityEventType.unknownLabel
                func outcome(_ text: String) { applied.result.events.append(.init(event: label, outcome: text)) }
                guard let type, type.action != .acknowledge else {
                    outcome("acknowledged")
                    continue
                }
                guard case .issuerAndSubject(let issuer, let subject)? = token.subject(of: uri) else {
                    outcome("unmapped_subject")
                    continue
                }
                // A session-revoked event naming the provider session ends only that login's
                // sessions; the account-wide events end all of the subject's.
                let session = type.action == .endSessions ? token.sessionID(of: uri) : nil
                let target = ProviderLogoutTarget(provider: name, issuer: issuer, subject: subject, sessionID: session)
                switch type.action {
                case .endSessions, .endSessionsAndRevokeGrant:
                    let sessions = try await transaction.sessions.end(.provider(target))
                    try await transaction.loginStates.burnHandoffs(target)
                    applied.result.sessionsEnded += sessions.count
                    applied.ended += sessions
                    var account: UUID?
                    if type.action == .endSessionsAndRevokeGrant {
                        account = try await transaction.accounts.find(provider: name, issuer: issuer, subject: subject)
                        applied.ended += account.map { [$0] } ?? []
                    }
                    outcome(sessions.isEmpty && account == nil ? "no_match" : "ended")
                case .dropAccessTokens:
                    let dropped = try await transaction.securityEvents.dropAccessTokens(provider: name, issuer: issuer, subject: subject)
                    if let dropped {
                        applied.result.accessTokensDropped += dropped.dropped
                        applied.dropped.append(dropped.account)
                    }
                    outcome(dropped == nil ? "no_match" : "tokens_dropped")
                case .acknowledge:
                    break
                }
            }
            return applied
        }
        guard var applied else {
            // Push delivery is at least once: a transmitter that lost the 202 sends the token
            // again. It was acted on the first time; acting again could end sessions begun since,
            // so it is acknowledged and nothing is done (a captured token posted again is too).
            metrics.securityEventToken(provider: name, outcome: "duplicate")
            logger.notice("security event token delivered again: acknowledged, not acted on again", metadata: ["provider": .string(name)])
            var duplicate = SecurityEventResult()
            duplicate.duplicate = true
            return duplicate
        }
        // Nothing of theirs may be served from this instance's memory, even before the
        // database's notification comes back (the other instances drop it on that notification).
        revocations.cache.invalidate(accounts: applied.dropped)
        (applied.result.accountsRemoved, applied.result.revocations) = await revocations.removeAccountsWithoutSessions(applied.ended)
        metrics.securityEventToken(provider: name, outcome: "accepted")
        for event in applied.result.events {
            metrics.securityEvent(provider: name, event: event.event, outcome: event.outcome)
        }
        logger.notice(
            "security event token",
            metadata: [
                "provider": .string(name),
                "events": .string(applied.result.events.map { "\($0.event)=\($0.outcome)" }.joined(separator: ",")),
                "unknown_event_types": .string(token.events.keys.filter { SecurityEventType(rawValue: $0) == nil }.sorted().joined(separator: ",")),
                "sessions_ended": .stringConvertible(applied.result.sessionsEnded),
                "accounts_removed": .stringConvertible(applied.result.accountsRemoved),
                "access_tokens_dropped": .stringConvertible(applied.result.accessTokensDropped),
            ]
        )
        return applied.result
    }

    /// The answer to a token that could not be validated, logged and counted.
    private func securityEventRefusal(_ error: OIDCError, provider name: String) -> any Error {
        switch error.kind {
        case .invalidSecurityEvent(let problem):
            metrics.securityEventToken(provider: name, outcome: "invalid")
            logger.warning("security event token refused", metadata: ["provider": .string(name), "reason": .string(problem.description)])
            let code: SecurityEventRefusal.Code =
                switch problem {
                case .token(.algorithmNotAllowed), .token(.unknownKey), .token(.badSignature): .invalidKey
                case .token(.issuer), .token(.tenantNotAllowed): .invalidIssuer
                case .token(.audience): .invalidAudience
                default: .invalidRequest
                }
            return SecurityEventRefusal(code, "The security event token is not valid: \(problem).")
        case .providerUnavailable(let retryAfter):
            metrics.securityEventToken(provider: name, outcome: "unavailable")
            logger.warning("security event token: the provider's keys cannot be fetched", metadata: ["provider": .string(name)])
            return OAuthError(
                .temporarilyUnavailable,
                "The provider's signing keys cannot be fetched right now; send the security event token again later.",
                retryAfter: Int(retryAfter?.components.seconds ?? 30)
            )
        default:
            metrics.securityEventToken(provider: name, outcome: "unavailable")
            logger.error(
                "security event token: the provider's metadata or keys are unusable",
                metadata: ["provider": .string(name), "reason": .string(error.description)]
            )
            return OAuthError(.temporarilyUnavailable, "The provider's metadata or keys are unusable; an operator has been told.", retryAfter: 60)
        }
    }
}
