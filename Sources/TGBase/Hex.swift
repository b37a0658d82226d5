/// Bytes as hexadecimal digits, the one spelling of them in TokenGate (percent escapes, `\u`
/// escapes, bytea literals, keys in logs and statements). `String(format: "%02x", …)` per byte
/// goes through Foundation's formatter: about 5 000 instructions a byte, 157 000 for the 32-byte
/// key every DPoP proof is recorded under.
public enum Hex {
    /// `bytes` in lowercase hexadecimal (`0a1b…`). Takes an array, not any collection: a generic
    /// function called from another module walks its argument through witness tables (~200
    /// instructions a byte).
    public static func lowercase(_ bytes: [UInt8]) -> String {
        let count = bytes.count * 2
        guard count > 0 else { return "" }
        return bytes.withUnsafeBufferPointer { bytes in
            String(unsafeUninitializedCapacity: count) { buffer in
                for index in 0..<bytes.count {
                    (buffer[2 * index], buffer[2 * index + 1]) = digits(bytes[index])
                }
                return count
            }
        }
    }

    /// `byte`'s two digits, the high one first (`uppercase`: `A`–`F`, as percent-encoding writes
    /// them).
    public static func digits(_ byte: UInt8, uppercase: Bool = false) -> (high: UInt8, low: UInt8) {
        let table = uppercase ? uppercaseDigits : lowercaseDigits
        return (table.utf8Start[Int(byte >> 4)], table.utf8Start[Int(byte & 0x0F)])
    }

    private static let lowercaseDigits: StaticString = "0123456789abcdef"
    private static let uppercaseDigits: StaticString = "0123456789ABCDEF"
}
