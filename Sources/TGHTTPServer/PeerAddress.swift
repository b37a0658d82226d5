import CMicroHTTPDShims
import TGBase

#if canImport(Glibc)
import Glibc
#endif

/// A TCP peer's IP address, kept as raw bytes and turned into text only when asked: most requests
/// never need the text, and formatting it eagerly cost more than the rest of the request head.
enum PeerAddress: Sendable, Hashable {
    case unknown
    /// An IPv4 address in network byte order, as in `in_addr.s_addr`.
    case ipv4(UInt32)
    /// An IPv6 address: the 16 bytes of `in6_addr`, in order.
    case ipv6(UInt64, UInt64)
    /// An address given as text (tests, proxies).
    case text(String)

    /// Copies the address out of a `sockaddr` (which libmicrohttpd owns).
    init(_ address: UnsafePointer<sockaddr>?) {
        guard let address else {
            self = .unknown
            return
        }
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            self = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { .ipv4($0.pointee.sin_addr.s_addr) }
        case AF_INET6:
            self = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                withUnsafeBytes(of: v6.pointee.sin6_addr) { raw in
                    .ipv6(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                }
            }
        default:
            self = .unknown
        }
    }

    /// `127.0.0.1`, `::1`, or nil when unknown.
    var text: String? {
        switch self {
        case .unknown:
            return nil
        case .text(let text):
            return text
        case .ipv4(let networkOrder):
            return Self.dottedQuad(UInt32(bigEndian: networkOrder))
        case .ipv6(let high, let low):
            var address = in6_addr()
            withUnsafeMutableBytes(of: &address) { raw in
                raw.storeBytes(of: high, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
            }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// What the per-IP connection limit counts this peer under: its IPv4 address, or its IPv6
    /// address's first `ipv6PrefixLength` bits; unknown peers share one key.
    func clientKey(ipv6PrefixLength: Int) -> ClientKey {
        switch self {
        case .unknown:
            return ClientKey(address: "-", ipv6PrefixLength: ipv6PrefixLength)
        case .ipv4(let networkOrder):
            return ClientKey(ipv4: UInt32(bigEndian: networkOrder))
        case .ipv6(let high, let low):
            // The bytes of `in6_addr` in order, loaded as stored: big-endian numbers.
            return ClientKey(ipv6: UInt64(bigEndian: high), UInt64(bigEndian: low), prefixLength: ipv6PrefixLength)
        case .text(let text):
            return ClientKey(address: text, ipv6PrefixLength: ipv6PrefixLength)
        }
    }

    /// `a.b.c.d` written byte by byte: at most 15 bytes, which a Swift string holds inline (string
    /// interpolation of four integers cost more than parsing the request's head).
    static func dottedQuad(_ value: UInt32) -> String {
        String(unsafeUninitializedCapacity: 15) { buffer in
            var count = 0
            for shift in [24, 16, 8, 0] as [UInt32] {
                let octet = Int(value >> shift & 0xFF)
                if shift != 24 {
                    buffer[count] = UInt8(ascii: ".")
                    count += 1
                }
                if octet >= 100 {
                    buffer[count] = UInt8(0x30 + octet / 100)
                    count += 1
                }
                if octet >= 10 {
                    buffer[count] = UInt8(0x30 + octet / 10 % 10)
                    count += 1
                }
                buffer[count] = UInt8(0x30 + octet % 10)
                count += 1
            }
            return count
        }
    }
}
