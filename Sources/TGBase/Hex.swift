/// Bytes as hexadecimal text, two digits a byte. `String(format: "%02x", …)` per byte goes
/// through Foundation's formatter: about 5 000 instructions a byte, 157 000 for the 32-byte key
/// every DPoP proof is recorded under.
public enum Hex {
    /// `bytes` in lowercase hexadecimal (`0a1b…`).
    public static func lowercase(_ bytes: some Collection<UInt8>) -> String {
        text(bytes, digits: lowercaseDigits)
    }

    /// `bytes` in uppercase hexadecimal (`0A1B…`), as percent-encoding writes them.
    public static func uppercase(_ bytes: some Collection<UInt8>) -> String {
        text(bytes, digits: uppercaseDigits)
    }

    private static func text(_ bytes: some Collection<UInt8>, digits: StaticString) -> String {
        let count = bytes.count * 2
        guard count > 0 else { return "" }
        return String(unsafeUninitializedCapacity: count) { buffer in
            var index = 0
            for byte in bytes {
                buffer[index] = digits.utf8Start[Int(byte >> 4)]
                buffer[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
                index += 2
            }
            return count
        }
    }

    private static let lowercaseDigits: StaticString = "0123456789abcdef"
    private static let uppercaseDigits: StaticString = "0123456789ABCDEF"
}
