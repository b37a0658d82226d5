import Foundation
import TGBase
import TGCrypto

extension OpenIDProvider {
    /// Whether this provider's security event tokens are accepted: configured so (off by
    /// default), and a profile with a JWKS to verify them with.
    public var acceptsSecurityEvents: Bool {
        configuration.securityEvents != nil && configuration.profile.issuesIDTokens
    }

    /// Validates a security event token the provider pushed (RFC 8417, RFC 8935, SSF 1.0) as ID
    /// and logout tokens are validated (signature with a key of the provider's JWKS, the
    /// algorithm allowlist, `iss` with Entra's tenant template and allowlist), then its own
    /// rules: `aud` the configured audience, `typ` `secevent+jwt` (or none), an `iat` within the
    /// configured window, `exp` and `nbf` when present, a `jti`, `events` an object of event
    /// payloads, and `sub_id` or `sub` a subject identifier when present. Whether the `jti` was
    /// seen before is the caller's to check, in storage every instance shares.
    ///
    /// Throws ``OIDCError/Kind/invalidSecurityEvent(_:)`` for a token that fails, and what
    /// fetching the metadata or keys throws.
    public func validateSecurityEventToken(_ raw: String) async throws(OIDCError) -> SecurityEventToken {
        guard let settings = configuration.securityEvents else { throw OIDCError(.misconfigured("shared signals are not enabled")) }
        let metadata = try await metadata(policy: try configuration.profile.resolvedPolicy(nil))
        guard let jwksURI = settings.jwksURI ?? metadata.jwksURI else { throw OIDCError(.misconfigured("provider publishes no jwks_uri")) }
        let now = clock.now()
        let expectations = SecurityEventExpectations(
            issuer: settings.issuer ?? metadata.issuer,
            accountIssuer: settings.issuer == nil || metadata.issuer.contains("{tenantid}") ? nil : metadata.issuer,
            audience: settings.audience ?? configuration.clientID,
            allowedTenants: Set(configuration.profile.allowedTenants.map { $0.lowercased() }),
            allowedAlgorithms: configuration.allowedAlgorithms,
            clockSkew: configuration.clockSkew,
            maxAge: settings.maxAge,
            now: now
        )
        return try await SecurityEventValidator.validate(raw, expecting: expectations) { [self] (keyID: String?) throws(OIDCError) in
            try await candidateKeys(keyID, jwksURI: jwksURI, now: now)
        }
    }
}
