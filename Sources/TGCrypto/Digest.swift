internal import COpenSSL

/// One-shot message digests and HMAC.
public enum Digest {
    /// SHA-256 of `bytes` (32 bytes).
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] { digest(bytes, EVP_sha256(), length: 32) }

    /// SHA-384 of `bytes` (48 bytes).
    public static func sha384(_ bytes: [UInt8]) -> [UInt8] { digest(bytes, EVP_sha384(), length: 48) }

    /// SHA-512 of `bytes` (64 bytes).
    public static func sha512(_ bytes: [UInt8]) -> [UInt8] { digest(bytes, EVP_sha512(), length: 64) }

    /// HMAC-SHA256 of `message` under `key` (32 bytes).
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var outputLength: UInt32 = 0
        let result = withNonNullBytes(key) { keyPointer, keyCount in
            withNonNullBytes(message) { messagePointer, messageCount in
                output.withUnsafeMutableBufferPointer { outputBuffer in
                    HMAC(EVP_sha256(), keyPointer, Int32(keyCount), messagePointer, messageCount, outputBuffer.baseAddress, &outputLength)
                }
            }
        }
        guard result != nil, outputLength == 32 else { fatalOpenSSL("HMAC") }
        return output
    }

    /// Whether `lhs` and `rhs` hold the same bytes, in time independent of where they differ
    /// (`CRYPTO_memcmp`). The lengths are not secret: different lengths compare unequal at once.
    public static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard !lhs.isEmpty else { return true }
        return lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in
                CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
            }
        }
    }

    private static func digest(_ bytes: [UInt8], _ type: OpaquePointer?, length: Int) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: length)
        var outputLength: UInt32 = 0
        let status = withNonNullBytes(bytes) { input, count in
            output.withUnsafeMutableBufferPointer { outputBuffer in
                EVP_Digest(input, count, outputBuffer.baseAddress, &outputLength, type, nil)
            }
        }
        guard status == 1, Int(outputLength) == length else { fatalOpenSSL("EVP_Digest") }
        return output
    }

    /// A digest of bytes in memory only fails when OpenSSL itself is broken (no provider).
    private static func fatalOpenSSL(_ function: String) -> Never {
        let error = CryptoError.drainingOpenSSLQueue(.openSSL)
        fatalError("\(function) failed: \(error.debugDescription)")
    }
}
