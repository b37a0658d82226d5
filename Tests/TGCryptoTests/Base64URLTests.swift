import TGCrypto
import Testing

struct Base64URLTests {
    // RFC 4648 §10 vectors, translated to the URL alphabet without padding.
    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
    ])
    func encodesAndDecodesRFC4648Vectors(plain: String, encoded: String) throws {
        #expect(Base64URL.encode(utf8(plain)) == encoded)
        #expect(try Base64URL.decode(encoded) == utf8(plain))
    }

    @Test func usesURLSafeAlphabet() throws {
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(try Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test func roundTripsEveryByteValue() throws {
        let bytes = (0...255).map { UInt8($0) }
        for length in 0...bytes.count {
            let prefix = Array(bytes.prefix(length))
            #expect(try Base64URL.decode(Base64URL.encode(prefix)) == prefix)
        }
    }

    @Test(arguments: [
        "Zg==", "Zm9v+A", "Zm9v/A", "Zm 9v", "Zm9v\n", "Z", "Zm9vY", "Zh", "Zm9", "é", "Zm9v.",
    ])
    func rejectsPaddingForeignCharactersImpossibleLengthsAndNonCanonicalBits(text: String) {
        #expect(throws: CryptoError.malformed) { try Base64URL.decode(text) }
    }
}
