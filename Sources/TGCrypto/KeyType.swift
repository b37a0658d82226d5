internal import COpenSSL

/// The curves TGCrypto supports, named as in JWK `crv` (RFC 7518 §6.2.1.1).
public enum EllipticCurve: String, Sendable, Hashable, CaseIterable {
    /// NIST P-256 (prime256v1), for ES256.
    case p256 = "P-256"
    /// NIST P-384 (secp384r1), for ES384.
    case p384 = "P-384"

    /// Bytes of one coordinate, and of each of `r` and `s` in a JWS ECDSA signature.
    var coordinateByteCount: Int { self == .p256 ? 32 : 48 }

    var nid: Int32 { self == .p256 ? NID_X9_62_prime256v1 : NID_secp384r1 }

    /// The name OpenSSL uses for the group.
    var openSSLName: String { self == .p256 ? "prime256v1" : "secp384r1" }
}

/// What kind of asymmetric key a ``PublicKey`` or ``PrivateKey`` holds.
public enum KeyType: Sendable, Hashable {
    /// RSA with a modulus of `modulusBits` bits.
    case rsa(modulusBits: Int)
    /// ECDSA on `curve`.
    case ec(EllipticCurve)
    /// EdDSA on edwards25519 (Ed25519, RFC 8032; in JOSE an `OKP` key, RFC 8037).
    case ed25519
}

/// Shared inspection of an `EVP_PKEY` pointer, used by both key classes.
enum EVPKey {
    /// Bytes of an Ed25519 public key or seed.
    static let ed25519KeyByteCount = 32

    /// The key's type, or `nil` for one TGCrypto does not support (DSA, Ed448, other curves).
    static func keyType(of key: OpaquePointer) -> KeyType? {
        if EVP_PKEY_is_a(key, "RSA") == 1 {
            return .rsa(modulusBits: Int(EVP_PKEY_get_bits(key)))
        }
        if EVP_PKEY_is_a(key, "ED25519") == 1 { return .ed25519 }
        guard EVP_PKEY_is_a(key, "EC") == 1 else { return nil }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else {
            ERR_clear_error()
            return nil
        }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return EllipticCurve.allCases.first { $0.openSSLName == group }.map { .ec($0) }
    }

    /// The public half of `key` as a JWK (`kty` and the key members only).
    static func publicJWK(of key: OpaquePointer, type: KeyType) throws(CryptoError) -> JWK {
        switch type {
        case .rsa:
            let modulus = try bigNumber(key, OSSL_PKEY_PARAM_RSA_N, byteCount: nil)
            let exponent = try bigNumber(key, OSSL_PKEY_PARAM_RSA_E, byteCount: nil)
            return JWK(keyType: "RSA", modulus: Base64URL.encode(modulus), exponent: Base64URL.encode(exponent))
        case .ec(let curve):
            let x = try bigNumber(key, OSSL_PKEY_PARAM_EC_PUB_X, byteCount: curve.coordinateByteCount)
            let y = try bigNumber(key, OSSL_PKEY_PARAM_EC_PUB_Y, byteCount: curve.coordinateByteCount)
            return JWK(keyType: "EC", curve: curve.rawValue, x: Base64URL.encode(x), y: Base64URL.encode(y))
        case .ed25519:
            var x = [UInt8](repeating: 0, count: ed25519KeyByteCount)
            var length = x.count
            guard EVP_PKEY_get_raw_public_key(key, &x, &length) == 1, length == x.count else {
                throw .drainingOpenSSLQueue(.invalidKey)
            }
            return JWK(keyType: "OKP", curve: "Ed25519", x: Base64URL.encode(x))
        }
    }

    /// A big-number parameter as big-endian bytes: minimal (`byteCount` nil) or left-padded.
    private static func bigNumber(_ key: OpaquePointer, _ name: String, byteCount: Int?) throws(CryptoError) -> [UInt8] {
        var number: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(key, name, &number) == 1, let number else { throw .drainingOpenSSLQueue(.invalidKey) }
        defer { BN_free(number) }
        let length = byteCount ?? (Int(BN_num_bits(number)) + 7) / 8
        var bytes = [UInt8](repeating: 0, count: length)
        guard BN_bn2binpad(number, &bytes, Int32(length)) == Int32(length) else { throw .drainingOpenSSLQueue(.invalidKey) }
        return bytes
    }
}
