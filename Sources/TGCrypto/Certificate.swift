internal import COpenSSL
internal import Foundation

/// An X.509 certificate as a client credential names it (Entra ID's certificate credentials):
/// the DER and the thumbprints a JWS header carries to say which certificate's key signed it
/// (`x5t`, `x5t#S256`: RFC 7515 §4.1.7–4.1.8).
public struct Certificate: Sendable, Hashable {
    /// The certificate's DER encoding.
    public let der: [UInt8]

    /// The first `CERTIFICATE` block of `pem`. Throws ``CryptoError/malformed`` for no such block
    /// or bad base64, ``CryptoError/invalidKey`` when OpenSSL cannot read it as X.509.
    public init(pemRepresentation pem: String) throws(CryptoError) {
        guard let begin = pem.range(of: "-----BEGIN CERTIFICATE-----"),
            let end = pem.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<pem.endIndex),
            let data = Data(base64Encoded: String(pem[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace })),
            !data.isEmpty
        else { throw .malformed }
        der = Array(data)
        guard let certificate = Self.parse(der) else { throw .drainingOpenSSLQueue(.invalidKey) }
        X509_free(certificate)
    }

    /// `x5t#S256`: base64url of the SHA-256 of the DER.
    public var sha256Thumbprint: String { Base64URL.encode(Digest.sha256(der)) }

    /// `x5t`: base64url of the SHA-1 of the DER (what older Entra ID tenants look for).
    public var sha1Thumbprint: String { Base64URL.encode(Digest.sha1(der)) }

    /// Whether `key` is the private half of the certificate's public key.
    public func certifies(_ key: PrivateKey) -> Bool {
        guard let certificate = Self.parse(der) else { return false }
        defer { X509_free(certificate) }
        guard let publicKey = X509_get0_pubkey(certificate) else { return false }
        return EVP_PKEY_eq(publicKey, key.pointer) == 1
    }

    private static func parse(_ der: [UInt8]) -> OpaquePointer? {
        der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
    }
}
