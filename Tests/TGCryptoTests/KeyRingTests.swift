import Testing

@testable import TGCrypto

struct KeyRingTests {
    let oldKey = SymmetricKey.generate()
    let newKey = SymmetricKey.generate()
    let associatedData = utf8("upstream_grants.refresh_token:42")

    func ring(current: String = "2024-01") throws -> KeyRing {
        try KeyRing(currentKeyID: current, keys: ["2024-01": oldKey, "2025-06": newKey])
    }

    @Test func sealedBlobFollowsDocumentedLayout() throws {
        let nonce = [UInt8](repeating: 7, count: 12)
        let blob = try ring().seal(utf8("secret"), associatedData: associatedData, nonce: nonce)
        #expect(blob[0] == 1)
        #expect(blob[1] == 7)
        #expect(Array(blob[2..<9]) == utf8("2024-01"))
        #expect(Array(blob[9..<21]) == nonce)
        #expect(blob.count == 2 + 7 + 12 + 6 + 16)
        #expect(try KeyRing.keyID(of: blob) == "2024-01")
    }

    @Test func sealedBlobKnownAnswerUsesHeaderAsAssociatedData() throws {
        // GCM Test Case 15 key, nonce and plaintext, sealed by a ring: the ciphertext equals
        // the specification's (CTR mode does not depend on associated data), the tag does not.
        let key = try SymmetricKey(bytes: hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"))
        let vector = AESGCMTests.vectors[2]
        let ring = try KeyRing(currentKeyID: "k", keys: ["k": key])
        let blob = try ring.seal(hex(vector.plaintext), associatedData: [], nonce: hex(vector.nonce))
        #expect(Array(blob[15..<(15 + 64)]) == hex(vector.ciphertext))
        #expect(Array(blob.suffix(16)) != hex(vector.tag))
        #expect(try ring.open(blob) == hex(vector.plaintext))
    }

    @Test func sealThenOpenRoundTripsWithFreshNonces() throws {
        let ring = try ring()
        let first = try ring.seal(utf8("refresh-token"), associatedData: associatedData)
        let second = try ring.seal(utf8("refresh-token"), associatedData: associatedData)
        #expect(first != second)
        #expect(try ring.open(first, associatedData: associatedData) == utf8("refresh-token"))
        #expect(try ring.open(try ring.seal([], associatedData: [])) == [])
    }

    @Test func flippingAnyBitOfTheBlobMakesOpenFail() throws {
        let ring = try ring()
        let blob = try ring.seal(utf8("refresh-token"), associatedData: associatedData)
        for index in blob.indices {
            var tampered = blob
            tampered[index] ^= 0x01
            #expect(throws: CryptoError.self) { try ring.open(tampered, associatedData: associatedData) }
        }
        // Nonce, ciphertext and tag bits fail authentication specifically.
        for index in 9..<blob.count {
            var tampered = blob
            tampered[index] ^= 0x80
            #expect(throws: CryptoError.decryptionFailed) { try ring.open(tampered, associatedData: associatedData) }
        }
    }

    @Test func wrongAssociatedDataMakesOpenFail() throws {
        let ring = try ring()
        let blob = try ring.seal(utf8("refresh-token"), associatedData: associatedData)
        #expect(throws: CryptoError.decryptionFailed) { try ring.open(blob, associatedData: utf8("upstream_grants.refresh_token:43")) }
        #expect(throws: CryptoError.decryptionFailed) { try ring.open(blob) }
    }

    @Test func unknownKeyIDIsRefused() throws {
        let blob = try ring().seal(utf8("x"))
        let otherRing = try KeyRing(currentKeyID: "2025-06", keys: ["2025-06": newKey])
        #expect(throws: CryptoError.unknownKeyID) { try otherRing.open(blob) }
    }

    @Test func keyIDChangedToAnotherKnownKeyFailsAuthentication() throws {
        let ring = try KeyRing(currentKeyID: "key-a", keys: ["key-a": oldKey, "key-b": newKey])
        var blob = try ring.seal(utf8("x"))
        blob[6] = UInt8(ascii: "b")
        #expect(try KeyRing.keyID(of: blob) == "key-b")
        #expect(throws: CryptoError.decryptionFailed) { try ring.open(blob) }
    }

    @Test func oldKeyStillDecryptsAfterNewerKeyBecomesCurrent() throws {
        let before = try ring(current: "2024-01")
        let blob = try before.seal(utf8("refresh-token"), associatedData: associatedData)
        let after = try ring(current: "2025-06")
        #expect(try after.open(blob, associatedData: associatedData) == utf8("refresh-token"))
        #expect(try KeyRing.keyID(of: try after.seal(utf8("y"))) == "2025-06")
    }

    @Test func resealMovesOldBlobsToCurrentKeyOnly() throws {
        let blob = try ring(current: "2024-01").seal(utf8("refresh-token"), associatedData: associatedData)
        let after = try ring(current: "2025-06")
        let resealed = try #require(try after.resealUnderCurrentKey(blob, associatedData: associatedData))
        #expect(try KeyRing.keyID(of: resealed) == "2025-06")
        #expect(try after.open(resealed, associatedData: associatedData) == utf8("refresh-token"))
        #expect(try after.resealUnderCurrentKey(resealed, associatedData: associatedData) == nil)
    }

    @Test func truncatedAndGarbageBlobsThrowMalformed() throws {
        let ring = try ring()
        let blob = try ring.seal(utf8("refresh-token"))
        for length in 0..<(2 + 7 + 12 + 16) {
            #expect(throws: CryptoError.malformed) { try ring.open(Array(blob.prefix(length))) }
        }
        #expect(throws: CryptoError.malformed) { try ring.open([2] + blob.dropFirst()) }
        #expect(throws: CryptoError.malformed) { try ring.open([1, 0] + [UInt8](repeating: 0, count: 40)) }
        #expect(throws: CryptoError.malformed) { try KeyRing.keyID(of: [1, 255, 0x41]) }
        // Truncating the tag end of a blob leaves a well-formed but unauthentic blob.
        #expect(throws: CryptoError.decryptionFailed) { try ring.open(Array(blob.dropLast())) }
    }

    @Test func ringRefusesMissingCurrentKeyAndBadKeyIDs() {
        #expect(throws: CryptoError.unknownKeyID) { try KeyRing(currentKeyID: "missing", keys: ["k": oldKey]) }
        #expect(throws: CryptoError.invalidKey) { try KeyRing(currentKeyID: "", keys: ["": oldKey]) }
        #expect(throws: CryptoError.invalidKey) { try KeyRing(currentKeyID: "a b", keys: ["a b": oldKey]) }
        #expect(throws: CryptoError.invalidKey) {
            try KeyRing(currentKeyID: "k", keys: ["k": oldKey, String(repeating: "x", count: 256): newKey])
        }
    }
}
