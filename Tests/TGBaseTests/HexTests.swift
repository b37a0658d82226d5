import Foundation
import TGBase
import Testing

@Suite struct HexTests {
    @Test func everyByteIsWrittenAsFoundationsFormatterWritesIt() {
        for value in 0...255 {
            let byte = UInt8(value)
            #expect(Hex.lowercase([byte]) == String(format: "%02x", byte))
            #expect(Hex.uppercase([byte]) == String(format: "%02X", byte))
        }
    }

    @Test func bytesAreWrittenInOrderTwoDigitsEach() {
        #expect(Hex.lowercase([0x00, 0x0A, 0xFF, 0x7F, 0x80]) == "000aff7f80")
        #expect(Hex.uppercase([0xAD, 0xBE, 0xEF]) == "ADBEEF")
        #expect(Hex.lowercase([0xDE, 0xAD, 0xBE, 0xEF][1...]) == "adbeef")
        #expect(Hex.lowercase([UInt8]()) == "")
        let key = (0..<32).map { UInt8($0 * 7 & 0xFF) }
        #expect(Hex.lowercase(key) == key.map { String(format: "%02x", $0) }.joined())
        #expect(Hex.lowercase(key).utf8.count == 64)
    }
}
