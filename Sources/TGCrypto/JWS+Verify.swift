internal import COpenSSL

extension JWS {
    /// Verifies the signature with `key`. Returns normally only for a valid signature.
    ///
    /// Throws ``CryptoError/unsupportedAlgorithm`` when the header's `alg` is not in
    /// `allowedAlgorithms` (which never contains `none` or HMAC) or differs from the key's own
    /// `alg`; ``CryptoError/invalidKey`` when the key does not fit the algorithm (RSA under
    /// 2048 bits, an EC key for RSA, a P-384 key for ES256, …); and
    /// ``CryptoError/invalidSignature`` when the signature does not verify.
    public func verify(
        using key: PublicKey,
        allowedAlgorithms: Set<JWSAlgorithm> = Set(JWSAlgorithm.allCases)
    ) throws(CryptoError) {
        guard let algorithm, allowedAlgorithms.contains(algorithm) else { throw .unsupportedAlgorithm }
        if let restriction = key.algorithm, restriction != algorithm.rawValue { throw .unsupportedAlgorithm }
        try algorithm.checkCompatible(with: key.keyType)

        let signatureForOpenSSL: [UInt8]
        if let curve = algorithm.curve {
            signatureForOpenSSL = try ECDSASignature.der(fromRaw: signature, curve: curve)
        } else {
            signatureForOpenSSL = signature
        }
        guard let context = EVP_MD_CTX_new() else { throw .drainingOpenSSLQueue(.openSSL) }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer? = nil
        guard EVP_DigestVerifyInit(context, &keyContext, algorithm.messageDigest, nil, key.pointer) == 1,
            algorithm.configure(keyContext)
        else { throw .drainingOpenSSLQueue(.openSSL) }
        let status = withNonNullBytes(signatureForOpenSSL) { signaturePointer, signatureCount in
            withNonNullBytes(signingInput) { inputPointer, inputCount in
                EVP_DigestVerify(context, signaturePointer, signatureCount, inputPointer, inputCount)
            }
        }
        guard status == 1 else { throw .drainingOpenSSLQueue(.invalidSignature) }
    }
}
