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
        // Four characters make three bytes; a tail of 2 or 3 characters makes 1 or 2. On the bytes
        // in place (element by element through `Array` cost ~40 instructions a character).
        let count = input.count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        var valid = true
        let output = values.withUnsafeBufferPointer { table in
            input.withUnsafeBufferPointer { source in
                [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                    // Every value in the alphabet is below 64; 0xFF (not in it) has the top bit set.
                    func value(_ index: Int) -> UInt32 {
                        let value = table[Int(source[index])]
                        if value & 0x80 != 0 { valid = false }
                        return UInt32(value)
                    }
                    var index = 0
                    var written = 0
                    while index + 4 <= source.count, valid {
                        let group = value(index) << 18 | value(index + 1) << 12 | value(index + 2) << 6 | value(index + 3)
                        buffer[written] = UInt8(truncatingIfNeeded: group >> 16)
                        buffer[written + 1] = UInt8(truncatingIfNeeded: group >> 8)
                        buffer[written + 2] = UInt8(truncatingIfNeeded: group)
                        index += 4
                        written += 3
                    }
                    // Leftover bits (4 after two characters, 2 after three) must be zero: otherwise
                    // several strings decode to the same bytes.
                    if valid, remainder == 2 {
                        let group = value(index) << 18 | value(index + 1) << 12
                        if group & 0xFFFF != 0 { valid = false }
                        buffer[written] = UInt8(truncatingIfNeeded: group >> 16)
                        written += 1
                    } else if valid, remainder == 3 {
                        let group = value(index) << 18 | value(index + 1) << 12 | value(index + 2) << 6
                        if group & 0xFF != 0 { valid = false }
                        buffer[written] = UInt8(truncatingIfNeeded: group >> 16)
                        buffer[written + 1] = UInt8(truncatingIfNeeded: group >> 8)
                        written += 2
                    }
                    initialized = written
                }
            }
        }
        guard valid else { throw .malformed }
        return output
    }
}
