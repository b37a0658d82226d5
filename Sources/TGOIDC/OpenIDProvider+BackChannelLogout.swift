import Foundation
import TGBase
import TGCrypto

extension OpenIDProvider {
    /// Whether this provider's logout tokens are accepted: configured so, and a profile that
    /// issues ID tokens (a plain OAuth 2.0 provider has no keys to sign them with).
    public var acceptsBackChannelLogout: Bool {
        configuration.acceptsBackChannelLogout && configuration.profile.issuesIDTokens
    }

    /// Validates a back-channel logout token (OpenID Connect Back-Channel Logout 1.0 §2.6) as
    /// ID tokens are validated (signature with a key of the provider's JWKS, the algorithm
    /// allowlist, `iss` with Entra's tenant template and allowlist, `aud`), then its own rules:
    /// `typ`, an `iat` within ``ProviderConfiguration/logoutTokenMaxAge``, `exp` when present,
    /// the back-channel logout event, no `nonce`, a `jti`, a `sub` or `sid`. Whether the `jti`
    /// was seen before is the caller's to check, in storage every instance shares.
    ///
    /// Throws ``OIDCError/Kind/invalidLogoutToken(_:)`` for a token that fails, and what
    /// fetching the metadata or keys throws (``OIDCError/Kind/providerUnavailable(retryAfter:)``
    /// when the provider cannot be reached).
    public func validateLogoutToken(_ raw: String) async throws(OIDCError) -> LogoutToken {
        // B2C: the default policy's metadata; its issuer and keys are the tenant's for every policy.
        let metadata = try await metadata(policy: try configuration.profile.resolvedPolicy(nil))
        guard let jwksURI = metadata.jwksURI else { throw OIDCError(.misconfigured("provider publishes no jwks_uri")) }
        let now = clock.now()
        let expectations = LogoutTokenExpectations(
            issuer: metadata.issuer,
            clientID: configuration.clientID,
            allowedTenants: Set(configuration.profile.allowedTenants.map { $0.lowercased() }),
            allowedAlgorithms: configuration.allowedAlgorithms,
            clockSkew: configuration.clockSkew,
            maxAge: configuration.logoutTokenMaxAge,
            requiresExplicitType: configuration.logoutTokenRequiresExplicitType,
            now: now
        )
        return try await LogoutTokenValidator.validate(raw, expecting: expectations) { [self] (keyID: String?) throws(OIDCError) in
            try await candidateKeys(keyID, jwksURI: jwksURI, now: now)
        }
    }
}
