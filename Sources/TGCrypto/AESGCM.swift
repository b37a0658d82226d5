internal import COpenSSL

/// AES-256-GCM with an explicit nonce: the primitive under ``KeyRing``.
///
/// Internal on purpose: a caller choosing nonces can reuse one, which breaks GCM completely.
/// ``KeyRing/seal(_:associatedData:)`` always draws a fresh random nonce.
enum AESGCM {
    static let nonceByteCount = 12
    static let tagByteCount = 16

    /// Encrypts `plaintext` under `key` and `nonce` (12 bytes), authenticating `associatedData`.
    static func seal(
        _ plaintext: [UInt8],
        key: SymmetricKey,
        nonce: [UInt8],
        associatedData: [UInt8]
    ) throws(CryptoError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        guard nonce.count == nonceByteCount, plaintext.count <= Int32.max else { throw .malformed }
        let context = try CipherContext()
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        var tag = [UInt8](repeating: 0, count: tagByteCount)
        let ok = key.withUnsafeBytes { keyBytes in
            nonce.withUnsafeBufferPointer { nonceBuffer in
                EVP_EncryptInit_ex(
                    context.pointer,
                    EVP_aes_256_gcm(),
                    nil,
                    keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    nonceBuffer.baseAddress
                ) == 1
            }
        }
        guard ok, context.update(associatedData: associatedData) else { throw .drainingOpenSSLQueue(.openSSL) }
        var written: Int32 = 0
        if !plaintext.isEmpty {
            let status = plaintext.withUnsafeBufferPointer { input in
                ciphertext.withUnsafeMutableBufferPointer { output in
                    EVP_EncryptUpdate(context.pointer, output.baseAddress, &written, input.baseAddress, Int32(input.count))
                }
            }
            guard status == 1, Int(written) == plaintext.count else { throw .drainingOpenSSLQueue(.openSSL) }
        }
        var finalBlock = [UInt8](repeating: 0, count: 16)
        guard EVP_EncryptFinal_ex(context.pointer, &finalBlock, &written) == 1, written == 0,
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), &tag) == 1
        else { throw .drainingOpenSSLQueue(.openSSL) }
        return (ciphertext, tag)
    }

    /// Decrypts and verifies; throws ``CryptoError/decryptionFailed`` when the tag does not
    /// match (wrong key, nonce, ciphertext, tag or associated data). No plaintext is returned
    /// unless the tag verifies.
    static func open(
        ciphertext: [UInt8],
        tag: [UInt8],
        key: SymmetricKey,
        nonce: [UInt8],
        associatedData: [UInt8]
    ) throws(CryptoError) -> [UInt8] {
        guard nonce.count == nonceByteCount, tag.count == tagByteCount, ciphertext.count <= Int32.max else { throw .malformed }
        let context = try CipherContext()
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        let ok = key.withUnsafeBytes { keyBytes in
            nonce.withUnsafeBufferPointer { nonceBuffer in
                EVP_DecryptInit_ex(
                    context.pointer,
                    EVP_aes_256_gcm(),
                    nil,
                    keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    nonceBuffer.baseAddress
                ) == 1
            }
        }
        guard ok, context.update(associatedData: associatedData) else { throw .drainingOpenSSLQueue(.openSSL) }
        var written: Int32 = 0
        if !ciphertext.isEmpty {
            let status = ciphertext.withUnsafeBufferPointer { input in
                plaintext.withUnsafeMutableBufferPointer { output in
                    EVP_DecryptUpdate(context.pointer, output.baseAddress, &written, input.baseAddress, Int32(input.count))
                }
            }
            guard status == 1, Int(written) == ciphertext.count else { throw .drainingOpenSSLQueue(.openSSL) }
        }
        var expectedTag = tag
        guard EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), &expectedTag) == 1 else {
            throw .drainingOpenSSLQueue(.openSSL)
        }
        var finalBlock = [UInt8](repeating: 0, count: 16)
        guard EVP_DecryptFinal_ex(context.pointer, &finalBlock, &written) == 1 else {
            plaintext.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
            throw .drainingOpenSSLQueue(.decryptionFailed)
        }
        return plaintext
    }
}

/// Owns one `EVP_CIPHER_CTX` for the length of one operation; never shared.
private final class CipherContext {
    let pointer: OpaquePointer

    init() throws(CryptoError) {
        guard let pointer = EVP_CIPHER_CTX_new() else { throw .drainingOpenSSLQueue(.openSSL) }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    /// Feeds associated data (no output); a no-op for none.
    func update(associatedData: [UInt8]) -> Bool {
        guard !associatedData.isEmpty else { return true }
        var written: Int32 = 0
        return associatedData.withUnsafeBufferPointer {
            EVP_CipherUpdate(pointer, nil, &written, $0.baseAddress, Int32($0.count)) == 1
        }
    }
}

@available(*, unavailable)
extension CipherContext: Sendable {}
