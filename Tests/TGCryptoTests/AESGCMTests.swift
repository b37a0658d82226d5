import Testing

@testable import TGCrypto

/// The GCM specification's 256-bit test cases (McGrew & Viega, "The Galois/Counter Mode of
/// Operation", test cases 13–16), copied from nettle's testsuite/gcm-test.c transcription.
struct AESGCMTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let key: String
        let plaintext: String
        let associatedData: String
        let nonce: String
        let ciphertext: String
        let tag: String
        var testDescription: String { name }
    }

    static let vectors = [
        Vector(
            name: "Test Case 13",
            key: "00000000000000000000000000000000 00000000000000000000000000000000",
            plaintext: "",
            associatedData: "",
            nonce: "000000000000000000000000",
            ciphertext: "",
            tag: "530f8afbc74536b9a963b4f1c4cb738b"
        ),
        Vector(
            name: "Test Case 14",
            key: "00000000000000000000000000000000 00000000000000000000000000000000",
            plaintext: "00000000000000000000000000000000",
            associatedData: "",
            nonce: "000000000000000000000000",
            ciphertext: "cea7403d4d606b6e074ec5d3baf39d18",
            tag: "d0d1c8a799996bf0265b98b5d48ab919"
        ),
        Vector(
            name: "Test Case 15",
            key: "feffe9928665731c6d6a8f9467308308 feffe9928665731c6d6a8f9467308308",
            plaintext: """
                d9313225f88406e5a55909c5aff5269a 86a7a9531534f7da2e4c303d8a318a72
                1c3c0c95956809532fcf0e2449a6b525 b16aedf5aa0de657ba637b391aafd255
                """,
            associatedData: "",
            nonce: "cafebabefacedbaddecaf888",
            ciphertext: """
                522dc1f099567d07f47f37a32a84427d 643a8cdcbfe5c0c97598a2bd2555d1aa
                8cb08e48590dbb3da7b08b1056828838 c5f61e6393ba7a0abcc9f662898015ad
                """,
            tag: "b094dac5d93471bdec1a502270e3cc6c"
        ),
        Vector(
            name: "Test Case 16",
            key: "feffe9928665731c6d6a8f9467308308 feffe9928665731c6d6a8f9467308308",
            plaintext: """
                d9313225f88406e5a55909c5aff5269a 86a7a9531534f7da2e4c303d8a318a72
                1c3c0c95956809532fcf0e2449a6b525 b16aedf5aa0de657ba637b39
                """,
            associatedData: "feedfacedeadbeeffeedfacedeadbeef abaddad2",
            nonce: "cafebabefacedbaddecaf888",
            ciphertext: """
                522dc1f099567d07f47f37a32a84427d 643a8cdcbfe5c0c97598a2bd2555d1aa
                8cb08e48590dbb3da7b08b1056828838 c5f61e6393ba7a0abcc9f662
                """,
            tag: "76fc6ece0f4e1768cddf8853bb2d551b"
        ),
    ]

    @Test(arguments: vectors)
    func sealMatchesGCMSpecificationVector(_ vector: Vector) throws {
        let key = try SymmetricKey(bytes: hex(vector.key))
        let sealed = try AESGCM.seal(hex(vector.plaintext), key: key, nonce: hex(vector.nonce), associatedData: hex(vector.associatedData))
        #expect(sealed.ciphertext == hex(vector.ciphertext))
        #expect(sealed.tag == hex(vector.tag))
    }

    @Test(arguments: vectors)
    func openRecoversGCMSpecificationPlaintext(_ vector: Vector) throws {
        let key = try SymmetricKey(bytes: hex(vector.key))
        let plaintext = try AESGCM.open(
            ciphertext: hex(vector.ciphertext),
            tag: hex(vector.tag),
            key: key,
            nonce: hex(vector.nonce),
            associatedData: hex(vector.associatedData)
        )
        #expect(plaintext == hex(vector.plaintext))
    }

    @Test func openRefusesVectorWithAnyTagBitFlipped() throws {
        let vector = Self.vectors[3]
        let key = try SymmetricKey(bytes: hex(vector.key))
        for bit in 0..<128 {
            var tag = hex(vector.tag)
            tag[bit / 8] ^= 1 << (bit % 8)
            #expect(throws: CryptoError.decryptionFailed) {
                try AESGCM.open(
                    ciphertext: hex(vector.ciphertext),
                    tag: tag,
                    key: key,
                    nonce: hex(vector.nonce),
                    associatedData: hex(vector.associatedData)
                )
            }
        }
    }

    @Test func symmetricKeyRefusesWrongLengthsAndNeverPrintsItsBytes() throws {
        #expect(throws: CryptoError.invalidKey) { try SymmetricKey(bytes: [UInt8](repeating: 1, count: 16)) }
        #expect(throws: CryptoError.invalidKey) { try SymmetricKey(base64URL: "not base64url!") }
        let key = SymmetricKey.generate()
        #expect("\(key)" == "<redacted>")
        #expect(String(reflecting: key) == "SymmetricKey(<redacted>)")
        let restored = try SymmetricKey(base64URL: key.base64URLEncodedSecret())
        #expect(restored.base64URLEncodedSecret() == key.base64URLEncodedSecret())
    }
}
