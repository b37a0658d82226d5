/// Base64url without padding (RFC 4648 §5, as JOSE uses it: RFC 7515 §2).
///
/// Decoding is strict: only `A–Z a–z 0–9 - _`, no padding, no whitespace, and the unused low
/// bits of the last character must be zero, so every byte string has exactly one encoding.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// 6-bit value of each ASCII character, or 0xFF when it is not in the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// The base64url encoding of `bytes`, without padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var output = [UInt8]()
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output.append(alphabet[Int(group >> 18 & 0x3F)])
            output.append(alphabet[Int(group >> 12 & 0x3F)])
            output.append(alphabet[Int(group >> 6 & 0x3F)])
            output.append(alphabet[Int(group & 0x3F)])
            index += 3
        }
        switch bytes.count - index {
        case 1:
            let group = UInt32(bytes[index]) << 16
            output.append(alphabet[Int(group >> 18 & 0x3F)])
            output.append(alphabet[Int(group >> 12 & 0x3F)])
        case 2:
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            output.append(alphabet[Int(group >> 18 & 0x3F)])
            output.append(alphabet[Int(group >> 12 & 0x3F)])
            output.append(alphabet[Int(group >> 6 & 0x3F)])
        default:
            break
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes `string` encodes. Throws ``CryptoError/malformed`` for a character outside
    /// the alphabet (padding `=` included), an impossible length, or non-zero trailing bits.
    public static func decode(_ string: some StringProtocol) throws(CryptoError) -> [UInt8] {
        try decode(utf8: Array(string.utf8))
    }

    static func decode(utf8 input: [UInt8]) throws(CryptoError) -> [UInt8] {
        let remainder = input.count % 4
        guard remainder != 1 else { throw .malformed }
        var output = [UInt8]()
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bitCount = 0
        for character in input {
            let value = values[Int(character)]
            guard value != 0xFF else { throw .malformed }
            accumulator = accumulator << 6 | UInt32(value)
            bitCount += 6
            if bitCount >= 8 {
                bitCount -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bitCount)))
                accumulator &= (1 << UInt32(bitCount)) - 1
            }
        }
        // Leftover bits (2 or 4) must be zero: otherwise several strings decode to the same bytes.
        guard accumulator == 0 else { throw .malformed }
        return output
    }
}
