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
        guard let jws = try? JWS(compactSerialization: raw) else { throw problem(.malformed) }
        guard let algorithm = jws.algorithm, expected.allowedAlgorithms.contains(algorithm) else {
            throw problem(.algorithmNotAllowed)
        }
        let candidates = try await keys(jws.header.keyID)
        guard !candidates.isEmpty else { throw problem(.unknownKey) }
        let verified = candidates.contains { key in
            (try? jws.verify(using: key, allowedAlgorithms: expected.allowedAlgorithms)) != nil
        }
        guard verified else { throw problem(.badSignature) }

        guard let claims = JSONValue(parsing: jws.payload)?.objectValue,
            let issuer = claims["iss"]?.stringValue,
            let subject = claims["sub"]?.stringValue, !subject.isEmpty,
            let audiences = claims["aud"]?.stringList,
            let exp = claims["exp"]?.integerValue,
            let iat = claims["iat"]?.integerValue
        else { throw problem(.malformed) }
        let tenantID = claims["tid"]?.stringValue

        try checkIssuer(issuer, tenantID: tenantID, expected)
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

    /// Exact issuer match; Entra's multi-tenant `{tenantid}` template is filled with the token's
    /// own `tid` first, and `tid` must be in the allowlist when there is one.
    private static func checkIssuer(_ issuer: String, tenantID: String?, _ expected: IDTokenExpectations) throws(OIDCError) {
        var wanted = expected.metadata.issuer
        if wanted.contains("{tenantid}") {
            guard let tenantID, isTenantID(tenantID) else { throw problem(.issuer) }
            wanted = wanted.replacingOccurrences(of: "{tenantid}", with: tenantID)
        }
        guard issuer == wanted else { throw problem(.issuer) }
        if !expected.allowedTenants.isEmpty {
            guard let tenantID, expected.allowedTenants.contains(tenantID.lowercased()) else { throw problem(.tenantNotAllowed) }
        }
    }

    /// A tenant id is a GUID: never let a crafted `tid` put `/` or `.` into the issuer compared.
    private static func isTenantID(_ text: String) -> Bool {
        text.utf8.count == 36
            && text.utf8.allSatisfy { $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }
    }

    private static func problem(_ problem: IDTokenProblem) -> OIDCError {
        OIDCError(.invalidIDToken(problem))
    }
}
