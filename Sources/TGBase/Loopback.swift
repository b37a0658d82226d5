#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Host names and addresses that can only mean this machine.
public enum Loopback {
    /// `localhost`, `::1` (bracketed or not) or an address in 127.0.0.0/8.
    public static func isLoopback(host: String) -> Bool {
        var bare = Substring(host)
        if bare.hasPrefix("["), bare.hasSuffix("]") { bare = bare.dropFirst().dropLast() }
        if bare.lowercased() == "localhost" || bare == "::1" { return true }
        var address = in_addr()
        return inet_pton(AF_INET, String(bare), &address) == 1 && UInt32(bigEndian: address.s_addr) >> 24 == 127
    }
}
