import TGBase
import Testing

@Suite struct FieldBytesTests {
    /// Every byte value at every position of values from 0 to 19 bytes long (the eight-byte words,
    /// the tail after them, a word's every lane): the word-wise checks say what a byte-by-byte
    /// look says.
    @Test func theWordWiseChecksAgreeWithAByteByByteLookForEveryByteAtEveryPosition() {
        var disagreements: [String] = []
        for count in 1..<20 {
            for position in 0..<count {
                for byte in UInt8.min...UInt8.max {
                    var value = [UInt8](repeating: UInt8(ascii: "a"), count: count)
                    value[position] = byte
                    let control = byte < 0x20 && byte != 0x09 || byte == 0x7F
                    let breakOrNUL = byte == 0 || byte == 0x0A || byte == 0x0D
                    value.withUnsafeBytes { bytes in
                        if FieldBytes.containsControl(bytes) != control { disagreements.append("control \(byte) at \(position) of \(count)") }
                        if FieldBytes.containsLineBreakOrNUL(bytes) != breakOrNUL {
                            disagreements.append("line break \(byte) at \(position) of \(count)")
                        }
                    }
                }
            }
        }
        #expect(disagreements == [])
    }

    /// UTF-8 text, tabs and DEL's neighbours are not control bytes; bytes just below the limits
    /// next to bytes above them (where a borrow could carry) are found.
    @Test func textAndTabsPassAndAControlByteAmongHighBytesIsFound() {
        func control(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes(FieldBytes.containsControl) }
        func lineBreak(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes(FieldBytes.containsLineBreakOrNUL) }
        #expect(!control(Array("Bearer eyJhbGciOi.JSUzI1NiIs\tïñtërnâtiônàl ✓ 😀 ~".utf8)))
        #expect(!lineBreak(Array("Bearer eyJhbGciOi.JSUzI1NiIs\t\u{1F}\u{0B}\u{0C}\u{7F} ✓".utf8)))
        #expect(control([0xFF, 0x80, 0xC3, 0x1F, 0xFF, 0xFF, 0xFF, 0xFF, 0x20]))
        #expect(control([0x20, 0x7E, 0x7F, 0x80, 0x21, 0x21, 0x21, 0x21]))
        #expect(lineBreak([0xFF, 0xFE, 0x0D, 0xFF, 0x0E, 0x0E, 0x0E, 0x0E, 0x0E]))
        #expect(!control([]) && !lineBreak([]))
    }
}
