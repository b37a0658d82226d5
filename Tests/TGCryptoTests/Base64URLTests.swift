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

    /// Every byte value at every position of strings of 2 to 8 characters (each tail, whole groups,
    /// a group and a tail): the decoder, four characters at a time, agrees with a decoder that
    /// takes one character at a time and refuses what it refuses.
    @Test func decodesEveryCharacterAtEveryPositionAsACharacterAtATimeDecoderDoes() throws {
        let base = Array("QUJDREVGR0".utf8)
        for length in 2...8 {
            for position in 0..<length {
                for byte in 0...255 {
                    var input = Array(base.prefix(length))
                    input[position] = UInt8(byte)
                    let text = String(decoding: input, as: UTF8.self)
                    guard text.utf8.elementsEqual(input) else { continue }
                    #expect((try? Base64URL.decode(text)) == Self.oneAtATime(input), "\(text)")
                }
            }
        }
    }

    /// The reference: bits accumulated a character at a time; nil where decoding must fail.
    private static func oneAtATime(_ input: [UInt8]) -> [UInt8]? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        guard input.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for character in input {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        return accumulator == 0 ? output : nil
    }
}
