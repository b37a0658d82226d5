internal import COpenSSL

/// An RSA, EC or Ed25519 private key that signs JWSs (for `private_key_jwt`, or a test identity
/// provider).
///
/// Owns one `EVP_PKEY`, freed on deinit. Never printed.
public final class PrivateKey: @unchecked Sendable, CustomStringConvertible {
    // Invariant making this Sendable: `pointer` is set once in init and never mutated through
    // this object; OpenSSL 3 allows concurrent read-only use of one EVP_PKEY (each signature
    // makes its own context), and it is freed only in deinit, when no reference remains.
    let pointer: OpaquePointer

    /// The kind of key.
    public let keyType: KeyType

    /// Takes ownership of `pointer`; frees it and throws when TGCrypto cannot use the key.
    init(owningKey pointer: OpaquePointer) throws(CryptoError) {
        guard let keyType = EVPKey.keyType(of: pointer) else {
            EVP_PKEY_free(pointer)
            throw .unsupportedAlgorithm
        }
        self.pointer = pointer
        self.keyType = keyType
    }

    deinit { EVP_PKEY_free(pointer) }

    /// What ``generate(_:)`` makes.
    public enum GenerationParameters: Sendable, Hashable {
        /// RSA with a modulus of `bits` bits (at least 2048) and exponent 65537.
        case rsa(bits: Int)
        /// An EC key on `curve`.
        case ec(EllipticCurve)
        /// An Ed25519 key.
        case ed25519
    }

    /// A freshly generated key. RSA-2048 takes tens of milliseconds of CPU.
    public static func generate(_ parameters: GenerationParameters) throws(CryptoError) -> PrivateKey {
        let algorithm: String
        switch parameters {
        case .rsa(let bits):
            guard (2048...16384).contains(bits) else { throw .invalidKey }
            algorithm = "RSA"
        case .ec:
            algorithm = "EC"
        case .ed25519:
            algorithm = "ED25519"
        }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else { throw .drainingOpenSSLQueue(.openSSL) }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw .drainingOpenSSLQueue(.openSSL) }
        let configured: Bool
        switch parameters {
        case .rsa(let bits): configured = EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(bits)) == 1
        case .ec(let curve): configured = EVP_PKEY_CTX_set_group_name(context, curve.openSSLName) == 1
        case .ed25519: configured = true
        }
        var key: OpaquePointer? = nil
        guard configured, EVP_PKEY_generate(context, &key) == 1, let key else { throw .drainingOpenSSLQueue(.openSSL) }
        return try PrivateKey(owningKey: key)
    }

    /// The Ed25519 key whose 32-byte secret seed is `seed` (a JWK's `d`, RFC 8037 §2).
    public convenience init(ed25519Seed seed: [UInt8]) throws(CryptoError) {
        guard seed.count == EVPKey.ed25519KeyByteCount,
            let key = EVP_PKEY_new_raw_private_key(NID_ED25519, nil, seed, seed.count)
        else { throw .drainingOpenSSLQueue(.invalidKey) }
        try self.init(owningKey: key)
    }

    /// The public half, sharing this key's `EVP_PKEY`.
    public var publicKey: PublicKey {
        EVP_PKEY_up_ref(pointer)
        return PublicKey(owning: pointer, keyType: keyType, algorithm: nil)
    }

    /// The public half as a JWK with the given `kid`, `alg` and `use`, e.g. for a JWKS.
    public func publicJWK(keyID: String? = nil, algorithm: String? = nil, use: String? = "sig") -> JWK {
        publicKey.jwk(keyID: keyID, algorithm: algorithm, use: use)
    }

    public var description: String { "PrivateKey(<redacted>)" }
}
