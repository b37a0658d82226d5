public import Foundation
public import TGCrypto

/// An app's DPoP key (RFC 9449) in tests: makes proofs the way an app's Secure Enclave key would.
public struct DPoPKey: Sendable {
    public let privateKey: PrivateKey
    public let algorithm: JWSAlgorithm
    /// The public half, as proofs carry it.
    public let jwk: JWK

    public init(_ algorithm: JWSAlgorithm = .es256) throws {
        let parameters: PrivateKey.GenerationParameters
        switch algorithm {
        case .es256: parameters = .ec(.p256)
        case .es384: parameters = .ec(.p384)
        case .edDSA: parameters = .ed25519
        default: parameters = .rsa(bits: 2048)
        }
        privateKey = try PrivateKey.generate(parameters)
        self.algorithm = algorithm
        jwk = privateKey.publicJWK(use: nil)
    }

    /// The RFC 7638 thumbprint TokenGate binds tokens to (`cnf.jkt`).
    public var thumbprint: String { (try? jwk.thumbprint()) ?? "" }

    /// A proof for `method` and `url`, with the access token's hash when one is sent with it.
    public func proof(
        _ method: String,
        _ url: String,
        accessToken: String? = nil,
        nonce: String? = nil,
        issuedAt: Date = Date(),
        jti: String = UUID().uuidString
    ) throws -> String {
        var claims: [String: Any] = ["jti": jti, "htm": method, "htu": url, "iat": Int(issuedAt.timeIntervalSince1970)]
        if let accessToken { claims["ath"] = Base64URL.encode(Digest.sha256(utf8: accessToken)) }
        if let nonce { claims["nonce"] = nonce }
        return try signed(claims)
    }

    /// Any claims and header, signed by this key (for proofs that break a rule).
    public func signed(_ claims: [String: Any], type: String? = "dpop+jwt", jwk: JWK? = nil, algorithm: JWSAlgorithm? = nil) throws -> String {
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        return try JWS.sign(
            payload: Array(payload),
            algorithm: algorithm ?? self.algorithm,
            type: type,
            jwk: jwk ?? self.jwk,
            using: privateKey
        )
    }
}
