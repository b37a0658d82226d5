internal import COpenSSL

/// The JWS signature algorithms TGCrypto accepts (RFC 7518 §3). `none` and the HMAC family
/// (`HS256`, …) are deliberately absent: with a public key they allow forged tokens.
public enum JWSAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    case rs384 = "RS384"
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    case rs512 = "RS512"
    /// RSASSA-PSS with SHA-256, MGF1 with SHA-256, salt as long as the hash.
    case ps256 = "PS256"
    /// ECDSA on P-256 with SHA-256.
    case es256 = "ES256"
    /// ECDSA on P-384 with SHA-384.
    case es384 = "ES384"
    /// EdDSA with an Ed25519 key (RFC 8037 §3.1).
    case edDSA = "EdDSA"

    /// The smallest RSA modulus accepted (RFC 7518 §3.3 and §3.5).
    static let minimumRSAModulusBits = 2048

    /// Throws unless `keyType` is what this algorithm needs: an RSA key of at least 2048 bits,
    /// an EC key on this algorithm's curve, or an Ed25519 key for EdDSA.
    func checkCompatible(with keyType: KeyType) throws(CryptoError) {
        switch (self, keyType) {
        case (.rs256, .rsa(let bits)), (.rs384, .rsa(let bits)), (.rs512, .rsa(let bits)), (.ps256, .rsa(let bits)):
            guard bits >= Self.minimumRSAModulusBits else { throw .invalidKey }
        case (.es256, .ec(.p256)), (.es384, .ec(.p384)), (.edDSA, .ed25519):
            return
        default:
            throw .invalidKey
        }
    }

    /// The curve of an ECDSA algorithm, `nil` for RSA.
    var curve: EllipticCurve? {
        switch self {
        case .es256: .p256
        case .es384: .p384
        default: nil
        }
    }

    var messageDigest: OpaquePointer? {
        switch self {
        case .rs256, .ps256, .es256: EVP_sha256()
        case .rs384, .es384: EVP_sha384()
        case .rs512: EVP_sha512()
        // EdDSA hashes inside the algorithm: OpenSSL takes no digest and one-shot input.
        case .edDSA: nil
        }
    }

    /// Sets the RSA padding on a signing or verifying context (PSS or PKCS #1 v1.5).
    func configure(_ context: OpaquePointer?) -> Bool {
        switch self {
        case .ps256:
            EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PSS_PADDING) == 1
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(context, RSA_PSS_SALTLEN_DIGEST) == 1
        case .rs256, .rs384, .rs512:
            EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1
        case .es256, .es384, .edDSA:
            true
        }
    }
}
