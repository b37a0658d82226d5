import TGBase
import Testing

@Suite struct ClientKeyTests {
    func key(_ text: String, _ prefixLength: Int = 64) -> ClientKey {
        ClientKey(address: text, ipv6PrefixLength: prefixLength)
    }

    @Test func anIPv4AddressIsItsOwnKeyWhateverTheIPv6Prefix() {
        #expect(key("198.51.100.7").description == "198.51.100.7")
        #expect(key("198.51.100.7", 32) == key("198.51.100.7", 128))
        #expect(key("198.51.100.7") != key("198.51.100.8"))
        #expect(ClientKey(ipv4: 0xC633_6407) == key("198.51.100.7"))
        #expect(key("0.0.0.0").description == "0.0.0.0" && key("255.255.255.255").description == "255.255.255.255")
    }

    @Test func anIPv6AddressIsKeyedByItsSlash64ByDefault() {
        #expect(key("2001:db8::1") == key("2001:db8::2"))
        #expect(key("2001:db8::1") == key("2001:db8:0:0:ffff:ffff:ffff:ffff"))
        #expect(key("2001:db8::1") != key("2001:db8:0:1::1"))
        #expect(key("2001:db8::1").description == "2001:db8::/64")
        #expect(key("2001:DB8:0:0:1::1").description == "2001:db8::/64")
        #expect(ClientKey(ipv6: 0x2001_0db8_0000_0000, 0x1234, prefixLength: 64) == key("2001:db8::5"))
        #expect(ClientKey.defaultIPv6PrefixLength == 64)
    }

    @Test func otherPrefixLengthsMaskThatManyBits() {
        #expect(key("2001:db8:1:2::1", 48) == key("2001:db8:1:ffff::1", 48))
        #expect(key("2001:db8:1:2::1", 48) != key("2001:db8:2:2::1", 48))
        #expect(key("2001:db8:1:2::1", 48).description == "2001:db8:1::/48")
        #expect(key("2001:db8:abcd::", 36).description == "2001:db8:a000::/36")
        #expect(key("2001:db8::1:2:3:4", 96).description == "2001:db8::1:2:0:0/96")
        #expect(key("2001:db8::1:2:3:5", 96) == key("2001:db8::1:2:3:4", 96))
        #expect(key("2001:db8::8000:0:0:1", 65) != key("2001:db8::1", 65))
        // At /128 each address is its own client, written as itself.
        #expect(key("2001:db8::1", 128) != key("2001:db8::2", 128))
        #expect(key("2001:db8::1", 128).description == "2001:db8::1")
        // Out of range is clamped (configuration allows 32 to 128 only).
        #expect(key("2001:db8::1", 200) == key("2001:db8::1", 128))
        #expect(key("2001:db8::1", -1).description == "::/0")
    }

    @Test func anIPv4MappedIPv6AddressIsItsIPv4Address() {
        #expect(key("::ffff:198.51.100.7") == key("198.51.100.7"))
        #expect(key("::FFFF:c633:6407").description == "198.51.100.7")
        #expect(ClientKey(ipv6: 0, 0xFFFF_C633_6407, prefixLength: 64) == key("198.51.100.7"))
        // Not mapped: an ordinary IPv6 address in ::/64.
        #expect(key("::1").description == "::/64")
        #expect(key("::fffe:198.51.100.7") != key("198.51.100.7"))
    }

    @Test func aZoneIsLeftOut() {
        #expect(key("fe80::1%eth0") == key("fe80::2"))
        #expect(key("fe80::1%eth0").description == "fe80::/64")
        #expect(key("fe80::1%eth0", 128) == key("fe80::1%lo", 128))
    }

    @Test func textThatIsNotAnIPAddressIsItsOwnKey() {
        for text in [
            "", "-", "unknown", "1.2.3", "1.2.3.4.5", "2001:db8::1::2", "2001:db8::1/64", "[2001:db8::1]", "%eth0", "198.51.100.7%eth0", "gggg::1",
        ] {
            #expect(key(text).description == text, "\(text)")
        }
        #expect(key("unknown") != key("unknown2"))
    }
}
