import Testing

@testable import TGHTTPServer

@Suite struct PeerAddressTests {
    @Test(arguments: ["0.0.0.0", "127.0.0.1", "10.0.100.9", "192.168.1.254", "255.255.255.255", "1.22.103.4"])
    func anIPv4AddressIsWrittenAsItsDottedQuad(_ text: String) {
        let octets = text.split(separator: ".").map { UInt32($0)! }
        let value = octets.reduce(0) { $0 << 8 | $1 }
        #expect(PeerAddress.ipv4(value.bigEndian).text == text)
    }
}
