internal import COpenSSL
internal import COpenSSLShims

/// An RSA, EC or Ed25519 public key that verifies JWS signatures.
///
/// Owns one `EVP_PKEY`, freed on deinit.
public final class PublicKey: @unchecked Sendable {
    // Invariant making this Sendable: `pointer` is set once in init and never mutated through
    // this object; OpenSSL 3 allows concurrent read-only use of one EVP_PKEY (each operation
    // makes its own context), and it is freed only in deinit, when no reference remains.
    let pointer: OpaquePointer

    /// The kind of key.
    public let keyType: KeyType

    /// The one algorithm the key is restricted to (its JWK's `alg`), if any.
    public let algorithm: String?

    /// Takes ownership of `pointer`.
    init(owning pointer: OpaquePointer, keyType: KeyType, algorithm: String?) {
        self.pointer = pointer
        self.keyType = keyType
        self.algorithm = algorithm
    }

    deinit { EVP_PKEY_free(pointer) }

    /// Loads the public key a JWK describes: `RSA` with `n` and `e`, `EC` with `crv`
    /// (`P-256`, `P-384`), `x` and `y`, or `OKP` with `crv` `Ed25519` and `x` (RFC 8037). A `use`
    /// other than `sig` and a point that is not on the curve are refused. Throws
    /// ``CryptoError/unsupportedAlgorithm`` for other key types or curves,
    /// ``CryptoError/invalidKey`` for anything else wrong with the key.
    public convenience init(jwk: JWK) throws(CryptoError) {
        if let use = jwk.use, use != "sig" { throw .invalidKey }
        let key: OpaquePointer?
        switch jwk.keyType {
        case "RSA":
            guard let modulusText = jwk.modulus, let exponentText = jwk.exponent else { throw .invalidKey }
            let modulus = try Self.decodeMember(modulusText)
            let exponent = try Self.decodeMember(exponentText)
            // RFC 7518 §6.3.1: no leading zero octets.
            guard modulus.first != 0, exponent.first != 0 else { throw .invalidKey }
            key = withNonNullBytes(modulus) { modulusPointer, modulusCount in
                withNonNullBytes(exponent) { exponentPointer, exponentCount in
                    CShims_EVP_PKEY_from_rsa_components(modulusPointer, modulusCount, exponentPointer, exponentCount)
                }
            }
        case "EC":
            guard let curveName = jwk.curve else { throw .invalidKey }
            guard let curve = EllipticCurve(rawValue: curveName) else { throw .unsupportedAlgorithm }
            guard let xText = jwk.x, let yText = jwk.y else { throw .invalidKey }
            let x = try Self.decodeMember(xText)
            let y = try Self.decodeMember(yText)
            guard x.count == curve.coordinateByteCount, y.count == curve.coordinateByteCount else { throw .invalidKey }
            key = CShims_EVP_PKEY_from_ec_point(curve.nid, x, x.count, y, y.count)
        case "OKP":
            guard let curveName = jwk.curve, let xText = jwk.x else { throw .invalidKey }
            guard curveName == "Ed25519" else { throw .unsupportedAlgorithm }
            let x = try Self.decodeMember(xText)
            guard x.count == EVPKey.ed25519KeyByteCount else { throw .invalidKey }
            key = EVP_PKEY_new_raw_public_key(NID_ED25519, nil, x, x.count)
        default:
            throw .unsupportedAlgorithm
        }
        guard let key else { throw .drainingOpenSSLQueue(.invalidKey) }
        guard let keyType = EVPKey.keyType(of: key) else {
            EVP_PKEY_free(key)
            throw .unsupportedAlgorithm
        }
        self.init(owning: key, keyType: keyType, algorithm: jwk.algorithm)
    }

    /// The key as a public JWK with the given `kid`, `alg` and `use`.
    public func jwk(keyID: String? = nil, algorithm: String? = nil, use: String? = "sig") -> JWK {
        // Reading the parameters of a key that loaded cannot fail short of memory exhaustion.
        var jwk = try! EVPKey.publicJWK(of: pointer, type: keyType)
        jwk.keyID = keyID
        jwk.algorithm = algorithm ?? self.algorithm
        jwk.use = use
        return jwk
    }

    private static func decodeMember(_ text: String) throws(CryptoError) -> [UInt8] {
        do {
            return try Base64URL.decode(text)
        } catch {
            throw .invalidKey
        }
    }
}
