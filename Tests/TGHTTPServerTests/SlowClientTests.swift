import Foundation
import HTTPTypes
import TGHTTPServer
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct SlowClientTests {
    /// Slowloris: a head that keeps trickling never trips the idle timeout, so the head deadline
    /// must cut it off, without an answer, and the server must go on serving others.
    @Test func disconnectsAClientThatTricklesItsRequestHeadPastTheHeadTimeout() async throws {
        let server = try startServer(
            {
                $0.connectionTimeoutSeconds = 30
                $0.requestHeadTimeout = .milliseconds(800)
            },
            handler: { _ in .response(ServerResponse(status: .ok, contentType: "text/plain", body: "served")) }
        )
        let slow = try RawConnection(port: server.port)
        let started = ContinuousClock.now
        try await slow.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        var cutOff = false
        for _ in 0..<40 {  // a byte every 100 ms for up to 4 s: never 30 s of silence
            try await Task.sleep(for: .milliseconds(100))
            do {
                try await slow.send("a")
            } catch {
                cutOff = true
                break
            }
        }
        if !cutOff { cutOff = try await slow.waitForClose() }
        #expect(cutOff)
        #expect(ContinuousClock.now - started < .seconds(4))
        let other = try await curl(["-s", "http://127.0.0.1:\(server.port)/"])
        #expect(other.stdout == "served")
        await server.shutdown()
    }

    /// The head clock restarts when a request ends: a keep-alive client that pauses between
    /// requests (but sends each head at once) is never cut off by it.
    @Test func keepsAKeepAliveClientThatPausesBetweenPromptRequests() async throws {
        let server = try startServer(
            { $0.requestHeadTimeout = .milliseconds(800) },
            handler: { _ in .response(ServerResponse(status: .ok, contentType: "text/plain", body: "served")) }
        )
        let client = try RawConnection(port: server.port)
        for _ in 0..<3 {
            try await client.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.hasPrefix("HTTP/1.1 200"))
            #expect(response.hasSuffix("served"))
            try await Task.sleep(for: .milliseconds(500))
        }
        await server.shutdown()
    }
}
