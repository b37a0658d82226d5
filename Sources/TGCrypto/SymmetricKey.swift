internal import COpenSSL

/// A 256-bit key for AES-256-GCM.
///
/// The bytes live in memory this object allocates and wipes (`OPENSSL_cleanse`) when it is
/// freed; they are never printed (`description` is `<redacted>`). Copies the caller made
/// before handing the bytes over (a configuration string, an array) are the caller's to wipe.
public final class SymmetricKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The key size in bytes.
    public static let byteCount = 32

    // Invariant making this Sendable: the buffer is written once in init, only read afterwards,
    // and freed in deinit when no reference remains. `nonisolated(unsafe)` because a raw
    // pointer is not Sendable by itself.
    private nonisolated(unsafe) let storage: UnsafeMutableRawBufferPointer

    /// A key from exactly 32 bytes; throws ``CryptoError/invalidKey`` for any other length.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.byteCount else { throw .invalidKey }
        storage = .allocate(byteCount: Self.byteCount, alignment: 16)
        storage.copyBytes(from: bytes)
    }

    /// A key from its base64url encoding (43 characters), as keys appear in configuration.
    public convenience init(base64URL: String) throws(CryptoError) {
        var decoded: [UInt8]
        do {
            decoded = try Base64URL.decode(base64URL)
        } catch {
            throw .invalidKey
        }
        defer { decoded.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        try self.init(bytes: decoded)
    }

    /// A fresh random key.
    public static func generate() -> SymmetricKey {
        var bytes = SecureRandom.bytes(byteCount)
        defer { bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        return try! SymmetricKey(bytes: bytes)
    }

    deinit {
        OPENSSL_cleanse(storage.baseAddress, storage.count)
        storage.deallocate()
    }

    /// Lends the key bytes to `body`; the pointer must not escape.
    func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(storage))
    }

    /// The key encoded as base64url, for writing a generated key into configuration.
    /// Handle the result as a secret.
    public func base64URLEncodedSecret() -> String {
        var bytes = withUnsafeBytes { Array($0) }
        defer { bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        return Base64URL.encode(bytes)
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "SymmetricKey(<redacted>)" }
}
