import Foundation
import Testing

@testable import TGTesting

/// The ports tests hand to servers they start as processes: below the kernel's ephemeral range,
/// where no client socket takes one before the server binds it, and each handed out once.
@Suite struct FreePortTests {
    @Test func portsLieBelowTheEphemeralRangeAndAreNeverHandedOutTwice() throws {
        let start = FreePorts.ephemeralStart()
        let ports = try (0..<50).map { _ in try freeLoopbackPort() }
        #expect(Set(ports).count == ports.count)
        for port in ports {
            #expect(Int(port) < start)
            #expect(Int(port) >= start - FreePorts.span)
            // Free a moment ago: it binds.
            #expect(try FreePorts.bindLoopback(port) == port)
        }
    }

    @Test func theEphemeralRangeIsReadFromTheKernel() throws {
        let text = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let first = try #require(text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) })
        #expect(FreePorts.ephemeralStart() == first)
    }
}
