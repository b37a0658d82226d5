import Testing

@testable import TGHTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// The per-IP connection budget counts an IPv6 client by its network prefix. Test servers listen
/// on 127.0.0.1 only, so the peers here are the `sockaddr` values libmicrohttpd hands the
/// connection callback, read by the same `PeerAddress` initialiser.
@Suite struct ConnectionsPerIPTests {
    /// The peer of a connection from `text` (an IPv4 or IPv6 literal), as the server reads it.
    func peer(_ text: String) -> PeerAddress {
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, text, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            return withUnsafePointer(to: &v6) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { PeerAddress($0) } }
        }
        var v4 = sockaddr_in()
        #expect(inet_pton(AF_INET, text, &v4.sin_addr) == 1, "\(text)")
        v4.sin_family = sa_family_t(AF_INET)
        return withUnsafePointer(to: &v4) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { PeerAddress($0) } }
    }

    @Test func twoAddressesOfOneIPv6SlashSixtyFourShareOneConnectionBudget() {
        let perIP = ConnectionsPerIP(limit: 1)
        #expect(perIP.opened(peer("2001:db8::1")))
        #expect(!perIP.opened(peer("2001:db8::2")))
        #expect(!perIP.opened(peer("2001:db8::ffff:ffff:ffff:ffff")))
        // Another /64 has a budget of its own.
        #expect(perIP.opened(peer("2001:db8:0:1::1")))
        // Closing the refused ones and the first one frees the shared budget.
        perIP.closed(peer("2001:db8::2"))
        perIP.closed(peer("2001:db8::ffff:ffff:ffff:ffff"))
        perIP.closed(peer("2001:db8::1"))
        #expect(perIP.opened(peer("2001:db8::abcd")))
    }

    @Test func aMappedIPv4PeerSharesTheBudgetOfItsIPv4AddressAndIPv4IsCountedPerAddress() {
        let perIP = ConnectionsPerIP(limit: 1)
        #expect(perIP.opened(peer("198.51.100.7")))
        #expect(!perIP.opened(peer("::ffff:198.51.100.7")))
        #expect(perIP.opened(peer("198.51.100.8")))
    }
}
