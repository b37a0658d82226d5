public import Foundation
public import TGBase
import TGCrypto

/// The claims of a validated ID token.
public struct IDToken: Sendable, Hashable {
    public var issuer: String
    public var subject: String
    public var audiences: [String]
    public var expiresAt: Date
    public var issuedAt: Date
    public var nonce: String?
    /// Entra's tenant id (`tid`), when present.
    public var tenantID: String?
    /// Every claim, including the ones above.
    public var claims: [String: JSONValue]
    /// The token as received (for `id_token_hint` at logout).
    public var raw: String

    /// The provider's session id (`sid`, OpenID Connect Back-Channel Logout 1.0 §2.1), when it
    /// sends one: a logout token naming it ends the sessions this login started.
    public var sessionID: String? {
        guard let sid = claims["sid"]?.stringValue, !sid.isEmpty, sid.utf8.count <= LogoutToken.maxClaimLength else { return nil }
        return sid
    }
}

/// What an ID token must match.
struct IDTokenExpectations {
    var metadata: ProviderMetadata
    var clientID: String
    /// The login's nonce; nil for tokens from a refresh (which carry none to compare).
    var nonce: String?
    /// On a refresh, the account's subject (OIDC Core §12.2: it must not change).
    var subject: String?
    var allowedTenants: Set<String>
    var allowedAlgorithms: Set<JWSAlgorithm>
    var clockSkew: Duration
    var now: Date
}

enum IDTokenValidator {
    /// Validates signature and claims (OIDC Core §3.1.3.7). `keys` returns the provider's
    /// candidate keys for a `kid`.
    static func validate(
        _ raw: String,
        expecting expected: IDTokenExpectations,
        keys: (String?) async throws(OIDCError) -> [PublicKey]
    ) async throws(OIDCError) -> IDToken {
        let (_, claims) = try await SignedJWT.verify(raw, allowedAlgorithms: expected.allowedAlgorithms, keys: keys, problem: problem)
        guard let issuer = claims["iss"]?.stringValue,
            let subject = claims["sub"]?.stringValue, !subject.isEmpty,
            let audiences = claims["aud"]?.stringList,
            let exp = claims["exp"]?.integerValue,
            let iat = claims["iat"]?.integerValue
        else { throw problem(.malformed) }
        let tenantID = claims["tid"]?.stringValue

        do {
            try SignedJWT.checkIssuer(issuer, tenantID: tenantID, expected: expected.metadata.issuer, allowedTenants: expected.allowedTenants)
        } catch {
            throw problem(error)
        }
        guard audiences.contains(expected.clientID) else { throw problem(.audience) }
        // §3.1.3.7 (4, 5): with several audiences azp must be present; when present it must be us.
        if let azp = claims["azp"] {
            guard azp.stringValue == expected.clientID else { throw problem(.authorizedParty) }
        } else if audiences.count > 1 {
            throw problem(.authorizedParty)
        }
        let skew = expected.clockSkew.timeInterval
        let now = expected.now.timeIntervalSince1970
        guard TimeInterval(exp) + skew > now else { throw problem(.expired) }
        guard TimeInterval(iat) - skew <= now else { throw problem(.issuedInFuture) }
        if let nbf = claims["nbf"] {
            guard let notBefore = nbf.integerValue, TimeInterval(notBefore) - skew <= now else { throw problem(.notYetValid) }
        }
        let nonce = claims["nonce"]?.stringValue
        if let expectedNonce = expected.nonce {
            guard let nonce, Digest.constantTimeEqual(Array(nonce.utf8), Array(expectedNonce.utf8)) else { throw problem(.nonce) }
        }
        if let expectedSubject = expected.subject, subject != expectedSubject { throw problem(.subject) }
        return IDToken(
            issuer: issuer,
            subject: subject,
            audiences: audiences,
            expiresAt: Date(timeIntervalSince1970: TimeInterval(exp)),
            issuedAt: Date(timeIntervalSince1970: TimeInterval(iat)),
            nonce: nonce,
            tenantID: tenantID,
            claims: claims,
            raw: raw
        )
    }

    private static func problem(_ problem: IDTokenProblem) -> OIDCError {
        OIDCError(.invalidIDToken(problem))
    }
}
