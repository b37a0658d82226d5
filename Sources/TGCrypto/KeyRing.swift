internal import COpenSSL

/// AES-256-GCM keys by key ID, one of them current: secrets at rest that survive key rotation.
///
/// ``seal(_:associatedData:)`` encrypts under the current key with a fresh random 96-bit nonce;
/// ``open(_:associatedData:)`` decrypts with whichever key the blob names, so blobs sealed
/// under an older key still open after a newer key became current.
///
/// Sealed blob layout (version 1), all lengths in bytes:
///
/// | offset      | length | field                                               |
/// |-------------|--------|-----------------------------------------------------|
/// | 0           | 1      | format version, `0x01`                              |
/// | 1           | 1      | L, the key ID's length, 1…255                       |
/// | 2           | L      | key ID, printable ASCII (0x21…0x7E)                 |
/// | 2 + L       | 12     | GCM nonce                                           |
/// | 14 + L      | n      | ciphertext, as long as the plaintext                |
/// | 14 + L + n  | 16     | GCM tag                                             |
///
/// The GCM associated data is the header (bytes `0 ..< 2 + L`) followed by the caller's
/// associated data, so neither the version nor the key ID can be changed undetected. Bind each
/// secret to where it belongs (for example its table, column and row ID) with the associated
/// data, so a ciphertext cannot be moved to another row.
///
/// Random 96-bit nonces stay safe for about 2³² blobs per key (NIST SP 800-38D §8.3): rotate
/// keys well before that.
public struct KeyRing: Sendable {
    /// The only blob format version written and read.
    public static let formatVersion: UInt8 = 1

    /// The ID of the key new blobs are sealed under.
    public let currentKeyID: String

    private let keys: [String: SymmetricKey]

    /// A ring of `keys` by key ID, sealing under `currentKeyID`. Throws
    /// ``CryptoError/unknownKeyID`` when `currentKeyID` is not among the keys and
    /// ``CryptoError/invalidKey`` for a key ID that is empty, longer than 255 bytes or not
    /// printable ASCII.
    public init(currentKeyID: String, keys: [String: SymmetricKey]) throws(CryptoError) {
        for keyID in keys.keys where !Self.isValidKeyID(keyID) { throw .invalidKey }
        guard keys[currentKeyID] != nil else { throw .unknownKeyID }
        self.currentKeyID = currentKeyID
        self.keys = keys
    }

    /// The IDs of all keys in the ring, sorted.
    public var keyIDs: [String] { keys.keys.sorted() }

    /// Encrypts `plaintext` under the current key with a fresh random nonce, authenticating
    /// `associatedData` (which is not stored in the blob: pass the same bytes to open it).
    public func seal(_ plaintext: [UInt8], associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        try seal(plaintext, associatedData: associatedData, nonce: SecureRandom.bytes(AESGCM.nonceByteCount))
    }

    /// ``seal(_:associatedData:)`` with a given nonce, for known-answer tests only.
    func seal(_ plaintext: [UInt8], associatedData: [UInt8], nonce: [UInt8]) throws(CryptoError) -> [UInt8] {
        let key = keys[currentKeyID]!
        let header = [Self.formatVersion, UInt8(currentKeyID.utf8.count)] + Array(currentKeyID.utf8)
        let (ciphertext, tag) = try AESGCM.seal(plaintext, key: key, nonce: nonce, associatedData: header + associatedData)
        return header + nonce + ciphertext + tag
    }

    /// Decrypts a blob made by ``seal(_:associatedData:)`` with the key it names. Throws
    /// ``CryptoError/malformed`` for a blob that does not follow the layout,
    /// ``CryptoError/unknownKeyID`` when its key is not in the ring, and
    /// ``CryptoError/decryptionFailed`` when anything was changed or the associated data differs.
    public func open(_ blob: [UInt8], associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        let parsed = try SealedBlob(blob)
        guard let key = keys[parsed.keyID] else { throw .unknownKeyID }
        return try AESGCM.open(
            ciphertext: parsed.ciphertext,
            tag: parsed.tag,
            key: key,
            nonce: parsed.nonce,
            associatedData: parsed.header + associatedData
        )
    }

    /// The key ID a blob was sealed under, read without decrypting (and so not authenticated):
    /// use it to find blobs to re-encrypt, not to trust.
    public static func keyID(of blob: [UInt8]) throws(CryptoError) -> String {
        try SealedBlob(blob).keyID
    }

    /// Opens `blob` and, unless it already uses the current key, seals its plaintext again under
    /// the current key with a fresh nonce. Returns `nil` when no re-encryption was needed.
    public func resealUnderCurrentKey(_ blob: [UInt8], associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8]? {
        var plaintext = try open(blob, associatedData: associatedData)
        defer { plaintext.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        guard try Self.keyID(of: blob) != currentKeyID else { return nil }
        return try seal(plaintext, associatedData: associatedData)
    }

    static func isValidKeyID(_ keyID: String) -> Bool {
        let bytes = keyID.utf8
        return (1...255).contains(bytes.count) && bytes.allSatisfy { (0x21...0x7E).contains($0) }
    }
}

/// The fields of a version-1 sealed blob, checked for layout only.
private struct SealedBlob {
    let header: [UInt8]
    let keyID: String
    let nonce: [UInt8]
    let ciphertext: [UInt8]
    let tag: [UInt8]

    init(_ blob: [UInt8]) throws(CryptoError) {
        guard blob.count >= 2, blob[0] == KeyRing.formatVersion else { throw .malformed }
        let keyIDLength = Int(blob[1])
        let nonceStart = 2 + keyIDLength
        let ciphertextStart = nonceStart + AESGCM.nonceByteCount
        guard keyIDLength > 0, blob.count >= ciphertextStart + AESGCM.tagByteCount else { throw .malformed }
        let tagStart = blob.count - AESGCM.tagByteCount
        keyID = String(decoding: blob[2..<nonceStart], as: UTF8.self)
        guard KeyRing.isValidKeyID(keyID) else { throw .malformed }
        header = Array(blob[0..<nonceStart])
        nonce = Array(blob[nonceStart..<ciphertextStart])
        ciphertext = Array(blob[ciphertextStart..<tagStart])
        tag = Array(blob[tagStart...])
    }
}
