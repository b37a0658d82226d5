internal import COpenSSL

/// Converts between JWS ECDSA signatures (RFC 7518 §3.4: `r || s`, each left-padded to the
/// curve's coordinate size) and the DER `ECDSA-Sig-Value` OpenSSL signs and verifies.
enum ECDSASignature {
    /// DER for a raw `r || s`; throws ``CryptoError/invalidSignature`` for a wrong length.
    static func der(fromRaw raw: [UInt8], curve: EllipticCurve) throws(CryptoError) -> [UInt8] {
        let half = curve.coordinateByteCount
        guard raw.count == 2 * half else { throw .invalidSignature }
        guard let signature = ECDSA_SIG_new() else { throw .drainingOpenSSLQueue(.openSSL) }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32(half), nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + half, Int32(half), nil) }
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            throw .drainingOpenSSLQueue(.openSSL)
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { throw .drainingOpenSSLQueue(.openSSL) }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        guard written == length else { throw .drainingOpenSSLQueue(.openSSL) }
        return der
    }

    /// Raw `r || s` for a DER signature OpenSSL produced.
    static func raw(fromDER der: [UInt8], curve: EllipticCurve) throws(CryptoError) -> [UInt8] {
        let parsed = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let parsed else { throw .drainingOpenSSLQueue(.openSSL) }
        defer { ECDSA_SIG_free(parsed) }
        let half = curve.coordinateByteCount
        var raw = [UInt8](repeating: 0, count: 2 * half)
        let ok = raw.withUnsafeMutableBufferPointer { buffer in
            BN_bn2binpad(ECDSA_SIG_get0_r(parsed), buffer.baseAddress, Int32(half)) == Int32(half)
                && BN_bn2binpad(ECDSA_SIG_get0_s(parsed), buffer.baseAddress! + half, Int32(half)) == Int32(half)
        }
        guard ok else { throw .drainingOpenSSLQueue(.openSSL) }
        return raw
    }
}
