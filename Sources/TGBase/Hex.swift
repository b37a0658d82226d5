/// Bytes as hexadecimal text, two digits a byte. `String(format: "%02x", …)` per byte goes
/// through Foundation's formatter: about 5 000 instructions a byte, 157 000 for the 32-byte key
/// every DPoP proof is recorded under.
public enum Hex {
    /// `bytes` in lowercase hexadecimal (`0a1b…`).
    public static func lowercase(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBufferPointer { text($0, digits: lowercaseDigits) }
    }

    /// `bytes` in lowercase hexadecimal (`0a1b…`).
    public static func lowercase(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.withUnsafeBufferPointer { text($0, digits: lowercaseDigits) }
    }

    /// `bytes` in uppercase hexadecimal (`0A1B…`), as percent-encoding writes them.
    public static func uppercase(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBufferPointer { text($0, digits: uppercaseDigits) }
    }

    /// Not generic: a generic function called from another module walks its argument through
    /// witness tables (~200 instructions a byte).
    private static func text(_ bytes: UnsafeBufferPointer<UInt8>, digits: StaticString) -> String {
        let count = bytes.count * 2
        guard count > 0 else { return "" }
        return String(unsafeUninitializedCapacity: count) { buffer in
            for index in 0..<bytes.count {
                buffer[2 * index] = digits.utf8Start[Int(bytes[index] >> 4)]
                buffer[2 * index + 1] = digits.utf8Start[Int(bytes[index] & 0x0F)]
            }
            return count
        }
    }

    private static let lowercaseDigits: StaticString = "0123456789abcdef"
    private static let uppercaseDigits: StaticString = "0123456789ABCDEF"
}
