internal import COpenSSL
internal import Foundation

extension PrivateKey {
    /// Loads an unencrypted private key from PEM: `PRIVATE KEY` (PKCS #8), `RSA PRIVATE KEY`
    /// (PKCS #1) or `EC PRIVATE KEY` (SEC 1), RSA or EC P-256 / P-384. Text around the block
    /// (an `EC PARAMETERS` block, comments) is ignored. Throws ``CryptoError/malformed`` for
    /// no such block or bad base64 (encrypted keys included), ``CryptoError/invalidKey`` when
    /// OpenSSL cannot read the key, ``CryptoError/unsupportedAlgorithm`` for other key types.
    public convenience init(pemRepresentation pem: String) throws(CryptoError) {
        var der = try Self.derFromPEM(pem)
        defer { der.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        let key = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_AutoPrivateKey(nil, &cursor, buffer.count)
        }
        guard let key else { throw .drainingOpenSSLQueue(.invalidKey) }
        try self.init(owningKey: key)
    }

    /// The key as unencrypted PEM (`RSA PRIVATE KEY`, `EC PRIVATE KEY`, or PKCS #8 `PRIVATE KEY`
    /// for Ed25519). A secret.
    public var pemRepresentation: String {
        let length = i2d_PrivateKey(pointer, nil)
        precondition(length > 0, "i2d_PrivateKey failed on a loaded key")
        var der = [UInt8](repeating: 0, count: Int(length))
        defer { der.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        _ = der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_PrivateKey(pointer, &cursor)
        }
        let label: String
        switch keyType {
        case .rsa: label = "RSA PRIVATE KEY"
        case .ec: label = "EC PRIVATE KEY"
        // Ed25519 has no traditional format: i2d_PrivateKey writes PKCS #8.
        case .ed25519: label = "PRIVATE KEY"
        }
        let base64 = Data(der).base64EncodedString()
        var lines = ["-----BEGIN \(label)-----"]
        var index = base64.startIndex
        while index < base64.endIndex {
            let end = base64.index(index, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[index..<end]))
            index = end
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n") + "\n"
    }

    private static let labels = ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"]

    private static func derFromPEM(_ pem: String) throws(CryptoError) -> [UInt8] {
        for label in labels {
            guard let begin = pem.range(of: "-----BEGIN \(label)-----\n") ?? pem.range(of: "-----BEGIN \(label)-----\r\n"),
                let end = pem.range(of: "-----END \(label)-----", range: begin.upperBound..<pem.endIndex)
            else { continue }
            let body = pem[begin.upperBound..<end.lowerBound]
            // Encrypted traditional PEM carries headers such as "Proc-Type: 4,ENCRYPTED".
            guard !body.contains(":") else { throw .malformed }
            let base64 = body.filter { !$0.isWhitespace }
            guard let data = Data(base64Encoded: String(base64)) else { throw .malformed }
            return Array(data)
        }
        throw .malformed
    }
}
