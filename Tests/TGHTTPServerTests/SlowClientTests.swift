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

    /// Slowloris with the body: the head arrives at once, then the body trickles (never silent
    /// long enough for the idle timeout); under the minimum rate for a whole window, the
    /// connection is cut, and the server goes on serving others.
    @Test func disconnectsAClientThatTricklesItsRequestBodyBelowTheMinimumRate() async throws {
        let server = try startServer(
            {
                $0.connectionTimeoutSeconds = 30
                $0.minBodyRate = (bytesPerSecond: 1000, window: .milliseconds(600))
            },
            handler: { _ in .response(ServerResponse(status: .ok, contentType: "text/plain", body: "served")) }
        )
        let slow = try RawConnection(port: server.port)
        let started = ContinuousClock.now
        try await slow.send("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n")
        var cutOff = false
        for _ in 0..<40 {  // 10 bytes every 100 ms: 100 B/s, a tenth of the minimum
            try await Task.sleep(for: .milliseconds(100))
            do {
                try await slow.send("aaaaaaaaaa")
            } catch {
                cutOff = true
                break
            }
        }
        if !cutOff { cutOff = try await slow.waitForClose() }
        #expect(cutOff)
        #expect(ContinuousClock.now - started < .seconds(3))
        let other = try await curl(["-s", "--data-binary", "x=1", "http://127.0.0.1:\(server.port)/"])
        #expect(other.stdout == "served")
        await server.shutdown()
    }

    /// A body sent at a fair pace passes, however long it takes in all.
    @Test func keepsABodyThatArrivesFasterThanTheMinimumRate() async throws {
        let server = try startServer(
            { $0.minBodyRate = (bytesPerSecond: 1000, window: .milliseconds(300)) },
            handler: { request in .response(ServerResponse(status: .ok, contentType: "text/plain", body: "got \(request.body.count)")) }
        )
        let client = try RawConnection(port: server.port)
        try await client.send("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4000\r\n\r\n")
        for _ in 0..<10 {  // 400 bytes every 100 ms: 4000 B/s, for a second (three windows)
            try await client.send(String(repeating: "b", count: 400))
            try await Task.sleep(for: .milliseconds(100))
        }
        let response = try await client.readResponse()
        #expect(response.hasSuffix("got 4000"))
        await server.shutdown()
    }

    /// Connections from one address past the per-IP limit are closed as they open, counted over
    /// every loop; an exempt peer (a trusted proxy) is not limited.
    @Test func closesConnectionsFromOneAddressPastThePerIPLimitAcrossLoops() async throws {
        let server = try startServer(
            {
                $0.threads = 2
                $0.perIPConnectionLimit = 3
            },
            handler: { _ in .response(ServerResponse(status: .ok, contentType: "text/plain", body: "served")) }
        )
        var open: [RawConnection] = []
        for _ in 0..<3 { open.append(try RawConnection(port: server.port)) }
        for connection in open {
            try await connection.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await connection.readResponse().hasSuffix("served"))
        }
        let extra = try RawConnection(port: server.port)
        try? await extra.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try await extra.waitForClose())
        #expect(server.perIPRefusedCount == 1)
        // One closes: there is room again.
        _ = open.removeFirst()
        try await Task.sleep(for: .milliseconds(100))
        let again = try RawConnection(port: server.port)
        try await again.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try await again.readResponse().hasSuffix("served"))
        await server.shutdown()

        let exempt = try startServer(
            {
                $0.perIPConnectionLimit = 1
                $0.perIPConnectionLimitExempt = { $0 == "127.0.0.1" }
            },
            handler: { _ in .response(ServerResponse(status: .ok, contentType: "text/plain", body: "served")) }
        )
        var many: [RawConnection] = []
        for _ in 0..<4 { many.append(try RawConnection(port: exempt.port)) }
        for connection in many {
            try await connection.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await connection.readResponse().hasSuffix("served"))
        }
        #expect(exempt.perIPRefusedCount == 0)
        await exempt.shutdown()
    }
}
