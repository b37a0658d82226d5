import HTTPTypes
import TGApp
import TGHTTPServer
import TGTesting
import Testing

/// Behind reverse proxies: forwarding fields count only from trusted peers.
@Suite struct TrustedProxiesTests {
    let proxies = TrustedProxies(["10.0.0.0/8", "192.168.1.5", "fd00::/8"])

    func client(_ peer: String?, _ fields: [(String, String)]) -> String? {
        var headerFields = HTTPFields()
        for (name, value) in fields { headerFields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return proxies.clientAddress(peer: peer, fields: RequestFields(headerFields))
    }

    @Test func forwardingFieldsFromAnUntrustedPeerAreIgnored() {
        #expect(client("203.0.113.9", [("X-Forwarded-For", "1.2.3.4")]) == "203.0.113.9")
        #expect(client("203.0.113.9", [("Forwarded", "for=1.2.3.4")]) == "203.0.113.9")
        #expect(client("192.168.1.6", [("X-Forwarded-For", "1.2.3.4")]) == "192.168.1.6")
        #expect(TrustedProxies([]).clientAddress(peer: "10.0.0.1", fields: RequestFields([.init("X-Forwarded-For")!: "1.2.3.4"])) == "10.0.0.1")
    }

    @Test func theClientIsTheFirstUntrustedAddressFromTheRight() {
        #expect(client("10.0.0.1", [("X-Forwarded-For", "198.51.100.7")]) == "198.51.100.7")
        // The app made up the leftmost entry; the trusted proxies appended the rest.
        #expect(client("10.0.0.1", [("X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.2.3.4")]) == "198.51.100.7")
        #expect(client("10.0.0.1", [("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "198.51.100.7, 192.168.1.5")]) == "198.51.100.7")
        #expect(client("fd12::1", [("X-Forwarded-For", "2001:db8::5")]) == "2001:db8::5")
        #expect(client("::ffff:10.1.1.1", [("X-Forwarded-For", "198.51.100.7")]) == "198.51.100.7")
        // Only trusted hops: the leftmost one.
        #expect(client("10.0.0.1", [("X-Forwarded-For", "10.9.9.9, 10.0.0.2")]) == "10.9.9.9")
        // No chain: the peer itself.
        #expect(client("10.0.0.1", []) == "10.0.0.1")
    }

    @Test func rfc7239ForwardedIsReadWhenThereIsNoXForwardedFor() {
        #expect(client("10.0.0.1", [("Forwarded", #"for="[2001:db8::5]:4711";proto=https, for=10.0.0.9"#)]) == "2001:db8::5")
        #expect(client("10.0.0.1", [("Forwarded", "for=198.51.100.7:8080;by=10.0.0.1")]) == "198.51.100.7")
        #expect(client("10.0.0.1", [("Forwarded", "for=9.9.9.9"), ("X-Forwarded-For", "198.51.100.7")]) == "198.51.100.7")
    }

    @Test func anEntryThatIsNotAnAddressEndsTheWalk() {
        #expect(client("10.0.0.1", [("X-Forwarded-For", "198.51.100.7, unknown")]) == "10.0.0.1")
        #expect(client("10.0.0.1", [("X-Forwarded-For", "198.51.100.7, 10.0.0.3, garbage")]) == "10.0.0.1")
        #expect(client("10.0.0.1", [("Forwarded", "for=_hidden, for=10.0.0.4")]) == "10.0.0.4")
    }

    @Test func theLoggedAndRateLimitedAddressIsTheForwardedClientOnlyBehindATrustedProxy() async throws {
        var router = Router()
        router.add(.get, "/who", .sync { _, info in ServerResponse(status: .ok, contentType: "text/plain", body: info.clientAddress ?? "-") })
        let sink = CapturingLogSink()
        let trusted = try serve(Application(router: router, logger: capturingLogger(sink), trustedProxies: TrustedProxies(["127.0.0.1"])))
        let seen = try await curl(["-H", "X-Forwarded-For: 6.6.6.6, 198.51.100.7", trusted.baseURL + "/who"])
        #expect(seen.stdout == "198.51.100.7")
        #expect(sink.lines.contains { $0.contains(#""remote":"198.51.100.7""#) })
        await trusted.shutdown()
        let untrusted = try serve(Application(router: router, logger: capturingLogger(sink), trustedProxies: TrustedProxies(["10.0.0.0/8"])))
        #expect(try await curl(["-H", "X-Forwarded-For: 198.51.100.7", untrusted.baseURL + "/who"]).stdout == "127.0.0.1")
        await untrusted.shutdown()
    }
}
