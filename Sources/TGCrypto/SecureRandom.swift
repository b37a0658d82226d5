internal import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG (`RAND_bytes`).
public enum SecureRandom {
    /// `count` random bytes. OpenSSL's generator failing means the process cannot make
    /// secrets safely, so that is fatal rather than an error to handle.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "SecureRandom.bytes: invalid count")
        guard count > 0 else { return [] }
        var output = [UInt8](repeating: 0, count: count)
        let status = output.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard status == 1 else {
            ERR_clear_error()
            fatalError("RAND_bytes failed: no secure randomness available")
        }
        return output
    }

    /// A URL-safe random token: base64url (no padding) of `byteCount` random bytes.
    /// The default 32 bytes give 256 bits and a 43-character string.
    public static func token(byteCount: Int = 32) -> String {
        Base64URL.encode(bytes(byteCount))
    }
}
