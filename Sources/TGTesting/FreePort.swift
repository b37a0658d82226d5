import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1 that was free a moment ago, for a server the test starts as a separate
/// process (which binds it seconds later).
///
/// Taken just below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`, 32768 and up by
/// default), never the same twice in a process: a port of that range can become some client
/// socket's local port between this check and the server's bind (any outgoing connection of any
/// test or database takes one), which failed a server's start with "Address already in use".
/// PostgreSQL clusters of the tests take 20000–29999 and the benches 18000–18999, below this. The
/// kernel's own choice when the range leaves no room below it.
public func freeLoopbackPort() throws -> UInt16 {
    let ephemeralStart = FreePorts.ephemeralStart()
    if ephemeralStart >= 30000 + FreePorts.span {
        for _ in 0..<64 {
            let port = UInt16(Int.random(in: (ephemeralStart - FreePorts.span)..<ephemeralStart))
            guard FreePorts.handedOut.withLock({ $0.insert(port).inserted }) else { continue }
            if (try? FreePorts.bindLoopback(port)) != nil { return port }
        }
    }
    return try FreePorts.bindLoopback(0)
}

enum FreePorts {
    /// How many ports below the ephemeral range are handed out.
    static let span = 2048
    static let handedOut = Mutex(Set<UInt16>())

    /// The first port of the kernel's ephemeral range (32768 when it cannot be read).
    static func ephemeralStart() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
            let first = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first, let start = Int(first)
        else { return 32768 }
        return start
    }

    /// Binds a socket to 127.0.0.1:`port` (0: the kernel's choice), closes it, and returns the port.
    static func bindLoopback(_ port: UInt16) throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
        return UInt16(bigEndian: address.sin_port)
    }
}
