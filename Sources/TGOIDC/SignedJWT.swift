import Foundation
import TGBase
import TGCrypto

/// The checks every JWT a provider signs for TokenGate goes through, whatever it is (an ID token,
/// a back-channel logout token): one verifier, so both get the same algorithm allowlist, key
/// lookup (with the JWKS refetch on an unknown `kid`) and issuer rules.
enum SignedJWT {
    /// Parses `raw`, checks its algorithm against `allowedAlgorithms` (which can hold neither
    /// `none` nor HMAC) and its signature with a key `keys` returns for its `kid`; returns the
    /// header and the claims. Nothing of the token is read before the signature verified.
    /// Problems are thrown as `problem` makes them (an ID token's or a logout token's); `keys`
    /// throws its own errors (the provider's JWKS cannot be fetched).
    static func verify(
        _ raw: String,
        allowedAlgorithms: Set<JWSAlgorithm>,
        keys: (String?) async throws(OIDCError) -> [PublicKey],
        problem: (IDTokenProblem) -> OIDCError
    ) async throws(OIDCError) -> (header: JWSHeader, claims: [String: JSONValue]) {
        guard let jws = try? JWS(compactSerialization: raw) else { throw problem(.malformed) }
        guard let algorithm = jws.algorithm, allowedAlgorithms.contains(algorithm) else {
            throw problem(.algorithmNotAllowed)
        }
        let candidates = try await keys(jws.header.keyID)
        guard !candidates.isEmpty else { throw problem(.unknownKey) }
        let verified = candidates.contains { key in
            (try? jws.verify(using: key, allowedAlgorithms: allowedAlgorithms)) != nil
        }
        guard verified else { throw problem(.badSignature) }
        guard let claims = JSONValue(parsing: jws.payload)?.objectValue else { throw problem(.malformed) }
        return (jws.header, claims)
    }

    /// Exact issuer match against `expected` (the provider's metadata issuer); Entra's
    /// multi-tenant `{tenantid}` template is filled with the token's own `tid` first, and `tid`
    /// must be in `allowedTenants` (lowercased) when there are any.
    static func checkIssuer(_ issuer: String, tenantID: String?, expected: String, allowedTenants: Set<String>) throws(IDTokenProblem) {
        var wanted = expected
        if wanted.contains("{tenantid}") {
            guard let tenantID, isTenantID(tenantID) else { throw .issuer }
            wanted = wanted.replacingOccurrences(of: "{tenantid}", with: tenantID)
        }
        guard issuer == wanted else { throw .issuer }
        if !allowedTenants.isEmpty {
            guard let tenantID, allowedTenants.contains(tenantID.lowercased()) else { throw .tenantNotAllowed }
        }
    }

    /// A tenant id is a GUID: never let a crafted `tid` put `/` or `.` into the issuer compared.
    private static func isTenantID(_ text: String) -> Bool {
        text.utf8.count == 36
            && text.utf8.allSatisfy { $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }
    }
}
