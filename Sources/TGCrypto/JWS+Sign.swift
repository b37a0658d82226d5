internal import COpenSSL

extension JWS {
    /// Signs `payload` and returns the compact serialization. The header holds `alg`, and
    /// `kid`, `typ` and `jwk` (a public key, as DPoP proofs carry it) when given, and
    /// `headerMembers` (`x5t#S256`, …; never replacing those) (members sorted, no whitespace).
    ///
    /// Throws ``CryptoError/invalidKey`` when `key` does not fit `algorithm` (for example
    /// ES256 needs a P-256 key, RS256 an RSA key of at least 2048 bits).
    public static func sign(
        payload: [UInt8],
        algorithm: JWSAlgorithm,
        keyID: String? = nil,
        type: String? = "JWT",
        jwk: JWK? = nil,
        headerMembers: [String: String] = [:],
        using key: PrivateKey
    ) throws(CryptoError) -> String {
        try algorithm.checkCompatible(with: key.keyType)
        var header: [String: Any] = ["alg": algorithm.rawValue]
        header["kid"] = keyID
        header["typ"] = type
        if let jwk { header["jwk"] = JWK.jsonObject(jwk.json()) }
        for (name, value) in headerMembers where header[name] == nil { header[name] = value }
        let signingInput = Base64URL.encode(JWK.serialize(header)) + "." + Base64URL.encode(payload)
        var signature = try rawSignature(Array(signingInput.utf8), algorithm: algorithm, key: key)
        if let curve = algorithm.curve {
            signature = try ECDSASignature.raw(fromDER: signature, curve: curve)
        }
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The OpenSSL signature (DER for ECDSA) over `input`.
    private static func rawSignature(_ input: [UInt8], algorithm: JWSAlgorithm, key: PrivateKey) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw .drainingOpenSSLQueue(.openSSL) }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer? = nil
        guard EVP_DigestSignInit(context, &keyContext, algorithm.messageDigest, nil, key.pointer) == 1,
            algorithm.configure(keyContext)
        else { throw .drainingOpenSSLQueue(.openSSL) }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, input, input.count) == 1 else { throw .drainingOpenSSLQueue(.openSSL) }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, input, input.count) == 1 else { throw .drainingOpenSSLQueue(.openSSL) }
        return Array(signature.prefix(length))
    }
}
