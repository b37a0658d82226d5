import Foundation
import TGCrypto

@testable import TGOIDC

/// Makes ID tokens the way a provider would, for validation tests without a server.
struct TokenSigner: Sendable {
    let rsa: PrivateKey
    let ec: PrivateKey
    let now: Date

    static let issuer = "https://idp.example/tenant/v2.0"
    static let clientID = "tokengate-client"

    init(now: Date = Date(timeIntervalSince1970: 1_800_000_000)) throws {
        rsa = try PrivateKey.generate(.rsa(bits: 2048))
        ec = try PrivateKey.generate(.ec(.p256))
        self.now = now
    }

    var keys: [JWK] {
        [rsa.publicJWK(keyID: "rsa-1", algorithm: "RS256"), ec.publicJWK(keyID: "ec-1", algorithm: "ES256")]
    }

    /// Standard valid claims, with `changes` applied (a nil value removes the member).
    func claims(_ changes: [String: Any?] = [:]) -> [String: Any] {
        let issuedAt = Int(now.timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": Self.issuer, "sub": "alice", "aud": Self.clientID, "iat": issuedAt, "exp": issuedAt + 3600,
            "nonce": "n-0S6_WzA2Mj",
        ]
        for (name, value) in changes {
            if let value { claims[name] = value } else { claims.removeValue(forKey: name) }
        }
        return claims
    }

    func sign(_ claims: [String: Any], algorithm: JWSAlgorithm = .rs256, keyID: String? = "rsa-1", key: PrivateKey? = nil) throws -> String {
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        return try JWS.sign(payload: Array(payload), algorithm: algorithm, keyID: keyID, using: key ?? (algorithm == .es256 ? ec : rsa))
    }

    /// A token with a hand-made header (for `alg: none` and HMAC key confusion).
    func unsafeToken(header: [String: String], claims: [String: Any], signature: (String) -> [UInt8]) throws -> String {
        let headerJSON = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        let input = Base64URL.encode(Array(headerJSON)) + "." + Base64URL.encode(Array(payload))
        return input + "." + Base64URL.encode(signature(input))
    }

    func expectations(
        issuer: String = TokenSigner.issuer,
        nonce: String? = "n-0S6_WzA2Mj",
        subject: String? = nil,
        allowedTenants: Set<String> = [],
        skew: Duration = .seconds(60),
        at time: Date? = nil
    ) -> IDTokenExpectations {
        IDTokenExpectations(
            metadata: ProviderMetadata(issuer: issuer, authorizationEndpoint: "https://idp.example/a", tokenEndpoint: "https://idp.example/t"),
            clientID: Self.clientID,
            nonce: nonce,
            subject: subject,
            allowedTenants: allowedTenants,
            allowedAlgorithms: [.rs256, .rs384, .rs512, .ps256, .es256, .es384],
            clockSkew: skew,
            now: time ?? now
        )
    }

    /// Validates against this signer's published keys.
    func validate(_ token: String, _ expectations: IDTokenExpectations) async throws(OIDCError) -> IDToken {
        let keys = self.keys
        return try await IDTokenValidator.validate(token, expecting: expectations) { (keyID: String?) throws(OIDCError) in
            keys.filter { keyID == nil || $0.keyID == keyID }.compactMap { try? PublicKey(jwk: $0) }
        }
    }
}

/// The ID-token problem `body` failed with, or nil when it succeeded or failed otherwise.
func idTokenProblem(_ body: () async throws -> IDToken) async -> IDTokenProblem? {
    do {
        _ = try await body()
        return nil
    } catch let error as OIDCError {
        if case .invalidIDToken(let problem) = error.kind { return problem }
        return nil
    } catch {
        return nil
    }
}
