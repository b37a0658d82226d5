internal import COpenSSL
internal import COpenSSLShims

/// One-shot message digests and HMAC.
public enum Digest {
    /// SHA-256 of `bytes` (32 bytes).
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        withNonNullBytes(bytes) { input, count in sha256(UnsafeRawBufferPointer(start: input, count: count)) }
    }

    /// SHA-256 of a string's UTF-8 (32 bytes).
    public static func sha256(utf8 text: String) -> [UInt8] { sha256(utf8: text[...]) }

    /// SHA-256 of a substring's UTF-8 (a bearer token still in its header), read in place when
    /// stored contiguously. Not generic: the bytes are lent without a protocol dispatch (every API
    /// call hashes one).
    public static func sha256(utf8 text: Substring) -> [UInt8] {
        // Empty input goes through the array path, which gives OpenSSL a non-NULL pointer.
        guard !text.utf8.isEmpty else { return sha256([]) }
        return text.utf8.withContiguousStorageIfAvailable { sha256(UnsafeRawBufferPointer($0)) } ?? sha256(Array(text.utf8))
    }

    /// SHA-256 of bytes lent in place (a bearer token still in its header field).
    public static func sha256(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        guard bytes.baseAddress != nil else { return sha256([]) }
        return sha256(UnsafeRawBufferPointer(bytes))
    }

    /// `input` must have a base address. OpenSSL's low-level SHA-256 (`CShims_SHA256`: no
    /// allocation, no provider dispatch), which cannot fail.
    private static func sha256(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buffer, initialized in
            CShims_SHA256(input.baseAddress, input.count, buffer.baseAddress)
            initialized = 32
        }
    }

    /// SHA-1 of `bytes` (20 bytes): only for identifiers that are defined with it (a
    /// certificate's `x5t`), never for security.
    public static func sha1(_ bytes: [UInt8]) -> [UInt8] { digest(bytes, Fetched.sha1.md, length: 20) }

    /// SHA-384 of `bytes` (48 bytes).
    public static func sha384(_ bytes: [UInt8]) -> [UInt8] { digest(bytes, Fetched.sha384.md, length: 48) }

    /// SHA-512 of `bytes` (64 bytes).
    public static func sha512(_ bytes: [UInt8]) -> [UInt8] { digest(bytes, Fetched.sha512.md, length: 64) }

    /// A digest algorithm fetched once from OpenSSL's default provider. `EVP_sha256()` and the
    /// like make OpenSSL 3 look the implementation up again on every use (locks, a hash-table
    /// lookup); SHA-256 runs on every API call (the bearer token's hash).
    struct Fetched: @unchecked Sendable {
        // Invariant: `md` is an explicitly fetched EVP_MD, never freed (these live as long as the
        // process); OpenSSL documents fetched algorithm objects as safe to share between threads.
        let md: OpaquePointer?

        init(_ name: String) {
            md = EVP_MD_fetch(nil, name, nil)
        }

        static let sha1 = Fetched("SHA1")
        static let sha384 = Fetched("SHA2-384")
        static let sha512 = Fetched("SHA2-512")
    }

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
        withNonNullBytes(bytes) { input, count in digest(UnsafeRawBufferPointer(start: input, count: count), type, length: length) }
    }

    /// `input` must have a base address (``withNonNullBytes(_:_:)`` gives one for empty input).
    private static func digest(_ input: UnsafeRawBufferPointer, _ type: OpaquePointer?, length: Int) -> [UInt8] {
        var outputLength: UInt32 = 0
        var status: Int32 = 0
        let output = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            status = EVP_Digest(input.baseAddress, input.count, buffer.baseAddress, &outputLength, type, nil)
            initialized = length
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
