internal import COpenSSL

/// The one error type of TGCrypto.
///
/// Compare with the static members (`error == .invalidSignature`); the set of kinds can grow
/// without breaking callers. `description` names only the kind, so it is safe to log or show;
/// `debugDescription` adds the OpenSSL error code and its text, never key material or input.
public struct CryptoError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: String, Sendable, Hashable {
        case invalidKey = "invalid key"
        case invalidSignature = "invalid signature"
        case unsupportedAlgorithm = "unsupported algorithm"
        case malformed = "malformed input"
        case decryptionFailed = "decryption failed"
        case unknownKeyID = "unknown key ID"
        case openSSL = "OpenSSL failure"
    }

    private let code: Code

    /// The first error OpenSSL queued for the failed call (`ERR_get_error`), or 0.
    public let openSSLErrorCode: UInt

    private init(code: Code, openSSLErrorCode: UInt = 0) {
        self.code = code
        self.openSSLErrorCode = openSSLErrorCode
    }

    /// A key is malformed, of the wrong type or size, or does not fit the algorithm.
    public static let invalidKey = CryptoError(code: .invalidKey)
    /// A signature does not verify.
    public static let invalidSignature = CryptoError(code: .invalidSignature)
    /// The algorithm is not on the allowlist (`none`, HMAC, …) or unknown.
    public static let unsupportedAlgorithm = CryptoError(code: .unsupportedAlgorithm)
    /// Input is not what the format requires (base64url, JSON, blob layout, PEM, …).
    public static let malformed = CryptoError(code: .malformed)
    /// An AES-GCM tag does not verify: wrong key, tampered data or wrong associated data.
    public static let decryptionFailed = CryptoError(code: .decryptionFailed)
    /// A sealed blob names a key ID the key ring does not hold.
    public static let unknownKeyID = CryptoError(code: .unknownKeyID)
    /// OpenSSL failed where it should not (allocation, internal error).
    public static let openSSL = CryptoError(code: .openSSL)

    /// Errors are equal when they are of the same kind; the OpenSSL code is a detail.
    public static func == (lhs: CryptoError, rhs: CryptoError) -> Bool { lhs.code == rhs.code }

    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String { "CryptoError: \(code.rawValue)" }

    public var debugDescription: String {
        guard openSSLErrorCode != 0 else { return description }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(openSSLErrorCode, &buffer, buffer.count)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(description) (OpenSSL \(openSSLErrorCode): \(text))"
    }

    /// This kind, carrying the first queued OpenSSL error; empties the thread's error queue so a
    /// later call on this thread does not see a stale error.
    static func drainingOpenSSLQueue(_ kind: CryptoError) -> CryptoError {
        let first = ERR_get_error()
        ERR_clear_error()
        return CryptoError(code: kind.code, openSSLErrorCode: first)
    }
}

extension CryptoError {
    /// Whether this thread's OpenSSL error queue is empty: after every failure TGCrypto reports
    /// it must be, so a later call on the thread does not see a stale error (tests check this).
    static var openSSLErrorQueueIsEmpty: Bool { ERR_peek_error() == 0 }
}
