import Foundation
import Synchronization
import TGEventLoop
import TGHTTPClient
import TGHTTPServer
import TGTesting
import Testing

/// Raw connections through libcurl (`CURLOPT_CONNECT_ONLY`): bytes both ways once connected, and
/// the client's URL rules before anything is connected.
@Suite struct UpstreamTunnelTests {
    /// Opens a tunnel on `loop` and waits for the outcome.
    static func open(
        _ scheme: String,
        _ authority: String,
        plainHTTPToLoopback: Bool = true,
        on loop: EventLoop
    ) async -> Result<
        UpstreamTunnel, HTTPClientError
    > {
        var configuration = HTTPClient.Configuration()
        configuration.allowPlainHTTPToLoopbackForTesting = plainHTTPToLoopback
        configuration.connectTimeout = .seconds(2)
        return await withCheckedContinuation { [configuration] continuation in
            loop.execute {
                UpstreamTunnel.open(scheme: scheme, authority: authority, configuration: configuration, loop: loop) { result in
                    continuation.resume(returning: result)
                }
            }
        }
    }

    @Test func aTunnelCarriesBytesBothWaysAndItsClientLeavesTheLoopsRounds() async throws {
        let server = try echoServer()
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let tunnel = try await Self.open("http", "127.0.0.1:\(server.port)", on: loop).get()
        // A whole request written raw, its answer read raw.
        let answer = await loop.run {
            let request = Array("POST /raw HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".utf8)
            var written = 0
            while written < request.count {
                guard let count = request.withUnsafeBytes({ tunnel.send(UnsafeRawBufferPointer(rebasing: $0[written...])) }) else {
                    return "send failed"
                }
                written += count
            }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            let deadline = EventLoop.now() + 5_000_000_000
            while EventLoop.now() < deadline {
                switch buffer.withUnsafeMutableBytes({ tunnel.receive(into: $0) }) {
                case .bytes(let count): received += buffer[..<count]
                case .wait: usleep(1000)
                case .end: return String(decoding: received, as: UTF8.self)
                case .failed: return "receive failed"
                }
            }
            return "timed out"
        }
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
        #expect(answer.hasSuffix("\r\n\r\nhello"))
        await loop.run { tunnel.close() }
        await server.shutdown()
    }

    @Test func aTunnelFollowsTheClientsRulesAndSaysWhyItFailed() async throws {
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        // Plain http to a host that is not loopback: refused before connecting.
        let plain = await Self.open("http", "example.com", on: loop)
        #expect(throws: HTTPClientError.insecureURLRefused) { try plain.get() }
        // Plain http to loopback only when allowed.
        let port = try freeLoopbackPort()
        let notAllowed = await Self.open("http", "127.0.0.1:\(port)", plainHTTPToLoopback: false, on: loop)
        #expect(throws: HTTPClientError.insecureURLRefused) { try notAllowed.get() }
        // Nothing listens: the connection is refused.
        let refused = await Self.open("http", "127.0.0.1:\(port)", on: loop)
        #expect(throws: HTTPClientError.self) { try refused.get() }
    }
}
