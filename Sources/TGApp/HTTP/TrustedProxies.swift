import HTTPTypes
public import TGHTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// Who the client is behind reverse proxies (docs/operations.md, "Behind nginx"): the TCP peer, unless the peer is a
/// configured trusted proxy; then the forwarding chain it sent is read from the right, skipping
/// trusted hops, and the first address that is not a trusted proxy is the client.
/// `X-Forwarded-For` is read, else RFC 7239 `Forwarded: for=`. Forwarding fields from any other
/// peer are ignored, so a client cannot choose its own rate-limit bucket or logged address.
public struct TrustedProxies: Sendable, Equatable {
    /// A network: the address bytes (4 or 16) and the prefix length.
    struct Network: Sendable, Equatable {
        var bytes: [UInt8]
        var prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var remaining = prefix
            for (have, want) in zip(address, bytes) where remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                guard have & mask == want & mask else { return false }
                remaining -= bits
            }
            return true
        }
    }

    let networks: [Network]

    /// From `trusted_proxies` entries (`10.0.0.0/8`, `::1`, `192.168.1.5`); entries that do not
    /// parse are skipped (the configuration validator refuses them first).
    public init(_ entries: [String]) {
        networks = entries.compactMap { entry in
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bytes = Self.addressBytes(String(parts[0])) else { return nil }
            let maximum = bytes.count * 8
            let prefix = parts.count == 2 ? Int(parts[1]) : maximum
            guard let prefix, (0...maximum).contains(prefix) else { return nil }
            return Network(bytes: bytes, prefix: prefix)
        }
    }

    public var isEmpty: Bool { networks.isEmpty }

    /// The client's address for a request from `peer` with these fields.
    public func clientAddress(peer: String?, fields: RequestFields) -> String? {
        guard !networks.isEmpty, let peer, isTrusted(peer) else { return peer }
        let forwardedFor = fields.values(.xForwardedFor)
        let chain: [Substring] =
            forwardedFor.isEmpty
            ? fields.values(.forwarded).flatMap(Self.forwardedFor)
            : forwardedFor.flatMap { $0.split(separator: ",") }
        var client = peer
        for entry in chain.reversed() {
            guard let address = Self.normalized(entry) else { break }
            client = address
            guard isTrusted(address) else { break }
        }
        return client
    }

    func isTrusted(_ address: String) -> Bool {
        guard let bytes = Self.addressBytes(address) else { return false }
        return networks.contains { $0.contains(bytes) }
    }

    /// An entry of a chain as an address: blanks trimmed; RFC 7239 quotes, `[v6]` brackets and a
    /// port removed; nil when what is left is not an IP address (`unknown`, an obfuscated id).
    static func normalized(_ entry: Substring) -> String? {
        var text = entry.drop { $0 == " " || $0 == "\t" }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = text.dropFirst().dropLast() }
        if text.hasPrefix("[") {
            guard let end = text.firstIndex(of: "]") else { return nil }
            text = text[text.index(after: text.startIndex)..<end]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            text = text[..<colon]  // IPv4 with a port
        }
        let address = String(text)
        return addressBytes(address) == nil ? nil : address
    }

    /// The `for=` values of `Forwarded` field values, in order.
    static func forwardedFor(_ value: String) -> [Substring] {
        value.split(separator: ",").compactMap { element in
            for pair in element.split(separator: ";") {
                let trimmed = pair.drop { $0 == " " || $0 == "\t" }
                if trimmed.lowercased().hasPrefix("for=") { return trimmed.dropFirst(4) }
            }
            return nil
        }
    }

    static func addressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            // An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the IPv4 address.
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return Array(bytes[12...]) }
            return bytes
        }
        return nil
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
    static let forwarded = HTTPField.Name("Forwarded")!
}
