import TGCrypto
import Testing

struct DigestTests {
    // FIPS 180-2 examples, as repeated in many test suites.
    @Test func sha256OfABCMatchesFIPSExample() {
        #expect(Digest.sha256(utf8("abc")) == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
    }

    @Test func sha256OfEmptyInputMatchesKnownValue() {
        #expect(Digest.sha256([]) == hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
    }

    // Two more blocks (padding past the first block) and many: the low-level functions
    // (`CShims_SHA256`) over every length a caller may give.
    @Test func sha256OfMultiBlockInputsMatchesFIPSExamples() {
        #expect(
            Digest.sha256(utf8("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))
                == hex("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        )
        #expect(
            Digest.sha256([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
                == hex("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        )
    }

    @Test func sha256OfAStringInPlaceMatchesTheOneOfItsBytes() {
        let token = "bearer-token-0123456789_abcdefghijklmnopqrstuvwxyz"
        #expect(Digest.sha256(utf8: token) == Digest.sha256(Array(token.utf8)))
        #expect(Digest.sha256(utf8: token.dropFirst(7)) == Digest.sha256(Array(token.utf8.dropFirst(7))))
        #expect(Digest.sha256(utf8: "") == Digest.sha256([]))
        // Substrings (a token still in its header) hash their own bytes only.
        #expect(Digest.sha256(utf8: token.dropFirst(token.count)) == Digest.sha256([]))
        #expect(Digest.sha256(utf8: "xabcx".dropFirst().dropLast()) == Digest.sha256(utf8: "abc"))
        #expect(Digest.sha256(utf8: "abc") == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
    }

    @Test func sha384AndSHA512HaveTheirLengths() {
        #expect(Digest.sha384(utf8("abc")).count == 48)
        #expect(Digest.sha512(utf8("abc")).count == 64)
        #expect(Digest.sha512(utf8("abc")) != Digest.sha512(utf8("abd")))
    }

    // RFC 4231 §4.2, test case 1.
    @Test func hmacSHA256MatchesRFC4231TestCase1() {
        let mac = Digest.hmacSHA256(key: [UInt8](repeating: 0x0b, count: 20), message: utf8("Hi There"))
        #expect(mac == hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"))
    }

    // RFC 4231 §4.3, test case 2.
    @Test func hmacSHA256MatchesRFC4231TestCase2() {
        let mac = Digest.hmacSHA256(key: utf8("Jefe"), message: utf8("what do ya want for nothing?"))
        #expect(mac == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    @Test func hmacSHA256AcceptsEmptyKeyAndMessage() {
        #expect(Digest.hmacSHA256(key: [], message: []).count == 32)
    }

    @Test func constantTimeEqualComparesContentAndLength() {
        #expect(Digest.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!Digest.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!Digest.constantTimeEqual([1, 2, 3], [1, 2]))
        #expect(Digest.constantTimeEqual([], []))
    }

    @Test func secureRandomBytesHaveRequestedLengthAndDiffer() {
        #expect(SecureRandom.bytes(0).isEmpty)
        let first = SecureRandom.bytes(32)
        #expect(first.count == 32)
        #expect(first != SecureRandom.bytes(32))
    }

    @Test func secureRandomTokenIsURLSafeBase64Of32Bytes() throws {
        let token = SecureRandom.token()
        #expect(token.count == 43)
        #expect(token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(try Base64URL.decode(token).count == 32)
        #expect(SecureRandom.token(byteCount: 16).count == 22)
    }
}
