extension JWK {
    /// The RFC 7638 JWK Thumbprint: base64url of the SHA-256 of the required members in
    /// lexicographic order without whitespace. Supports `RSA` (`e`, `kty`, `n`), `EC` (`crv`,
    /// `kty`, `x`, `y`) and `OKP` (`crv`, `kty`, `x`, RFC 8037 §2); throws
    /// ``CryptoError/unsupportedAlgorithm`` for other key types and ``CryptoError/malformed`` when a
    /// required member is missing.
    public func thumbprint() throws(CryptoError) -> String {
        let members: [(String, String?)]
        switch keyType {
        case "RSA": members = [("e", exponent), ("kty", keyType), ("n", modulus)]
        case "EC": members = [("crv", curve), ("kty", keyType), ("x", x), ("y", y)]
        case "OKP": members = [("crv", curve), ("kty", keyType), ("x", x)]
        default: throw .unsupportedAlgorithm
        }
        var json = "{"
        for (index, (name, value)) in members.enumerated() {
            guard let value else { throw .malformed }
            json += (index == 0 ? "" : ",") + "\"\(name)\":" + Self.quoted(value)
        }
        json += "}"
        return Base64URL.encode(Digest.sha256(Array(json.utf8)))
    }

    /// `value` as a JSON string literal with the minimal escaping RFC 8259 requires.
    private static func quoted(_ value: String) -> String {
        var result = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\u{00}"..."\u{1F}":
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
