#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a per-client limit (a rate-limit bucket, a connection budget) counts a client address
/// under. An IPv4 address is itself; an IPv6 address is its network prefix, because one
/// subscriber is usually given a whole /64 and could otherwise take a fresh bucket for every
/// request. An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is its IPv4 address. Logs and
/// metrics keep printing the real address: this is only the key.
public struct ClientKey: Sendable, Hashable, CustomStringConvertible {
    private enum Storage: Hashable {
        /// The address as a number (`192.0.2.1` is `0xC000_0201`).
        case ipv4(UInt32)
        /// The first `prefixLength` bits of the address, the rest zero, as two numbers (the
        /// address's first byte is the most significant byte of `high`).
        case ipv6(high: UInt64, low: UInt64, prefixLength: UInt8)
        /// Text that is not an IP address, kept as it is.
        case other(String)
    }

    private let storage: Storage

    private init(storage: Storage) {
        self.storage = storage
    }

    /// The prefix IPv6 clients are counted by unless configured otherwise.
    public static let defaultIPv6PrefixLength = 64

    /// An IPv4 address, as a number (host byte order).
    public init(ipv4 address: UInt32) {
        storage = .ipv4(address)
    }

    /// An IPv6 address given as two numbers (the first byte most significant in `high`), counted
    /// by its first `prefixLength` bits (clamped to 0...128).
    public init(ipv6 high: UInt64, _ low: UInt64, prefixLength: Int) {
        if high == 0, low >> 32 == 0xFFFF {
            storage = .ipv4(UInt32(truncatingIfNeeded: low))
            return
        }
        let bits = min(128, max(0, prefixLength))
        let highMask: UInt64 = bits >= 64 ? .max : (bits == 0 ? 0 : .max << (64 - bits))
        let lowMask: UInt64 = bits <= 64 ? 0 : (bits == 128 ? .max : .max << (128 - bits))
        storage = .ipv6(high: high & highMask, low: low & lowMask, prefixLength: UInt8(bits))
    }

    /// The key of an address written as text (`192.0.2.1`, `2001:db8::1`, `fe80::1%eth0`: a zone
    /// is left out); text that is not an IP address is its own key.
    public init(address text: String, ipv6PrefixLength: Int) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(ipv4: UInt32(bigEndian: v4.s_addr))
            return
        }
        let bare = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? text
        var v6 = in6_addr()
        guard bare.contains(":"), inet_pton(AF_INET6, bare, &v6) == 1 else {
            self.init(storage: .other(text))
            return
        }
        let (high, low) = withUnsafeBytes(of: &v6) { raw in
            (
                UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            )
        }
        self.init(ipv6: high, low, prefixLength: ipv6PrefixLength)
    }

    /// `192.0.2.1`; `2001:db8::/64` (the address alone at /128); other text as it was given.
    public var description: String {
        switch storage {
        case .ipv4(let address):
            var value = in_addr(s_addr: address.bigEndian)
            return withUnsafePointer(to: &value) { Self.format(AF_INET, $0, capacity: Int(INET_ADDRSTRLEN)) } ?? "-"
        case .ipv6(let high, let low, let prefixLength):
            var value = in6_addr()
            withUnsafeMutableBytes(of: &value) { raw in
                raw.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
            }
            let address = withUnsafePointer(to: &value) { Self.format(AF_INET6, $0, capacity: Int(INET6_ADDRSTRLEN)) } ?? "-"
            return prefixLength == 128 ? address : "\(address)/\(prefixLength)"
        case .other(let text):
            return text
        }
    }

    /// `address` (an `in_addr` or `in6_addr`) as `inet_ntop` writes it.
    private static func format(_ family: Int32, _ address: UnsafeRawPointer, capacity: Int) -> String? {
        var buffer = [CChar](repeating: 0, count: capacity)
        guard inet_ntop(family, address, &buffer, socklen_t(capacity)) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
