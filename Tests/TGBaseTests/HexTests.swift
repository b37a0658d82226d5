import Foundation
import TGBase
import Testing

@Suite struct HexTests {
    @Test func everyByteIsWrittenAsFoundationsFormatterWritesIt() {
        for value in 0...255 {
            let byte = UInt8(value)
            #expect(Hex.lowercase([byte]) == String(format: "%02x", byte))
            let upper = Hex.digits(byte, uppercase: true)
            #expect(String(decoding: [upper.high, upper.low], as: UTF8.self) == String(format: "%02X", byte))
            let lower = Hex.digits(byte)
            #expect(String(decoding: [lower.high, lower.low], as: UTF8.self) == String(format: "%02x", byte))
        }
    }

    @Test func bytesAreWrittenInOrderTwoDigitsEach() {
        #expect(Hex.lowercase([0x00, 0x0A, 0xFF, 0x7F, 0x80]) == "000aff7f80")
        #expect(Hex.lowercase([UInt8]()) == "")
        let key = (0..<32).map { UInt8($0 * 7 & 0xFF) }
        #expect(Hex.lowercase(key) == key.map { String(format: "%02x", $0) }.joined())
        #expect(Hex.lowercase(key).utf8.count == 64)
    }
}
