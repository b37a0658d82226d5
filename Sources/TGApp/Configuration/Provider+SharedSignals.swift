import TGOIDC

/// A provider's Shared Signals receiver settings (`shared_signals*`; README, "Shared Signals").
extension TokenGateConfiguration.Provider {
    /// Whether security event tokens are taken: configured so, by a kind with a JWKS.
    public var acceptsSharedSignals: Bool { sharedSignals && kind != .oauth2 }

    /// The OIDC client's view of these settings; nil when shared signals are off.
    var securityEventSettings: ProviderConfiguration.SecurityEventSettings? {
        guard acceptsSharedSignals else { return nil }
        return ProviderConfiguration.SecurityEventSettings(
            audience: sharedSignalsAudience,
            maxAge: .seconds(sharedSignalsMaxAgeSeconds),
            authorization: sharedSignalsAuthorization?.value,
            issuer: sharedSignalsIssuer,
            jwksURI: sharedSignalsJWKSURI
        )
    }

    /// The problems of the `shared_signals*` keys, as (key, message) pairs.
    func sharedSignalsProblems() -> [(key: String, message: String)] {
        var problems: [(key: String, message: String)] = []
        if kind == .oauth2, sharedSignals {
            problems.append(("shared_signals", "needs a provider with a JWKS (kind oauth2 has no keys to sign security event tokens with)"))
        }
        if !sharedSignals {
            for (key, set) in [
                ("shared_signals_audience", sharedSignalsAudience != nil), ("shared_signals_authorization", sharedSignalsAuthorization != nil),
                ("shared_signals_issuer", sharedSignalsIssuer != nil), ("shared_signals_jwks_uri", sharedSignalsJWKSURI != nil),
            ] where set {
                problems.append((key, "applies only with shared_signals: true"))
            }
        }
        if let audience = sharedSignalsAudience, audience.isEmpty { problems.append(("shared_signals_audience", "must not be empty")) }
        if let issuer = sharedSignalsIssuer, issuer.isEmpty { problems.append(("shared_signals_issuer", "must not be empty")) }
        if let authorization = sharedSignalsAuthorization, authorization.problem == nil, authorization.value.isEmpty {
            problems.append(("shared_signals_authorization", "must not be empty"))
        }
        return problems
    }
}
