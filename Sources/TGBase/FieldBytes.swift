/// Checks of header-field bytes eight at a time: every value of every request and answer is
/// checked for the bytes a field may not hold, and a check per byte costs more than the rest of
/// adding the field. Each check answers for all the bytes; a word that may hold such a byte is
/// looked at byte by byte, so the answer is exact.
public enum FieldBytes {
    /// Some byte of `bytes` is a control byte other than a tab (below 0x20, or 0x7F): what a
    /// field value may not hold (RFC 9110 §5.5).
    @inlinable
    public static func containsControl(_ bytes: UnsafeRawBufferPointer) -> Bool {
        any(bytes, below: 0x20, orEqualTo: 0x7F, isControl)
    }

    /// A control byte other than a tab (below 0x20, or 0x7F).
    @inlinable
    public static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 && byte != 0x09 || byte == 0x7F }

    /// Some byte of `bytes` is NUL, CR or LF: what would end a C string or a header line.
    @inlinable
    public static func containsLineBreakOrNUL(_ bytes: UnsafeRawBufferPointer) -> Bool {
        any(bytes, below: 0x0E, orEqualTo: nil) { $0 == 0 || $0 == 0x0A || $0 == 0x0D }
    }

    /// Some byte satisfies `exact`; each word is first tested for a byte below `limit` (or equal
    /// to `equal`), which every byte `exact` accepts is (a word without one is skipped whole).
    @inlinable
    static func any(
        _ bytes: UnsafeRawBufferPointer,
        below limit: UInt8,
        orEqualTo equal: UInt8?,
        _ exact: (UInt8) -> Bool
    ) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below = ones &* UInt64(limit)
        let pattern = equal.map { ones &* UInt64($0) }
        let count = bytes.count
        guard count >= 8 else {
            for index in 0..<count where exact(bytes[index]) { return true }
            return false
        }
        var index = 0
        while true {
            // The last word ends at the last byte (it may overlap the one before).
            let at = min(index, count - 8)
            let word = base.loadUnaligned(fromByteOffset: at, as: UInt64.self)
            // A byte below `limit` (the borrow sets its high bit), or equal to `equal` (its xor is
            // zero): possible false alarms after a true one only, so the word is then read exactly.
            var suspect = (word &- below) & ~word & highs
            if let pattern {
                let same = word ^ pattern
                suspect |= (same &- ones) & ~same & highs
            }
            if suspect != 0 {
                for offset in at..<at + 8 where exact(bytes[offset]) { return true }
            }
            if at == count - 8 { return false }
            index += 8
        }
    }
}
