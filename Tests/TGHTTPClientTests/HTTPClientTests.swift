import Foundation
import HTTPTypes
import TGHTTPClient
import TGHTTPServer
import TGTesting
import Testing

@Suite struct HTTPClientTests {
    @Test func sendsMethodTargetHeadersAndBodyAndReadsTheAnswer() async throws {
        let server = try echoServer()
        let client = testClient()
        var request = get(server.port, "/things?a=1&b=%20", method: .put)
        request.headerFields[HTTPField.Name("X-Thing")!] = "yes"
        let response = try await client.send(request, body: Array("payload".utf8), timeout: .seconds(5))
        #expect(response.head.status == .ok)
        #expect(response.head.headerFields[HTTPField.Name("X-Method")!] == "PUT")
        #expect(response.head.headerFields[HTTPField.Name("X-Target")!] == "/things?a=1&b=%20")
        #expect(response.head.headerFields[HTTPField.Name("X-Thing")!] == "yes")
        #expect(response.body == Array("payload".utf8))
        client.shutdown()
        await server.shutdown()
    }

    @Test func runs200RequestsAtOnceAndReusesConnections() async throws {
        let scripted = try ScriptedHTTPServer { _ in .raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
        let client = testClient { $0.maxConnectionsPerHost = 16 }
        for _ in 0..<2 {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    group.addTask { try await client.send(get(scripted.port, "/\(index)"), timeout: .seconds(10)).head.status.code }
                }
                for try await code in group { #expect(code == 200) }
            }
        }
        #expect(scripted.receivedRequests == 400)
        #expect(scripted.acceptedConnections <= 16)
        client.shutdown()
        scripted.stop()
    }

    @Test func timesOutAgainstAServerThatNeverAnswers() async throws {
        let scripted = try ScriptedHTTPServer { _ in .hang }
        let client = testClient()
        let started = ContinuousClock.now
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.send(get(scripted.port, "/"), timeout: .milliseconds(300))
        }
        #expect(error == .timeout)
        #expect(error?.isTransient == true)
        #expect(ContinuousClock.now - started < .seconds(10))  // the server never answers
        client.shutdown()
        scripted.stop()
    }

    @Test func reportsConnectFailedWhenNothingListens() async throws {
        let client = testClient()
        let error = await #expect(throws: HTTPClientError.self) { try await client.send(get(1, "/"), timeout: .seconds(5)) }
        #expect(error == .connectFailed)
        client.shutdown()
    }

    @Test func failsCleanlyWhenThePeerClosesOrSendsGarbage() async throws {
        let scripted = try ScriptedHTTPServer { request in
            request.target == "/close" ? .close : .raw("SMTP READY\r\n\r\n\u{0}\u{1}")
        }
        let client = testClient()
        let closed = await #expect(throws: HTTPClientError.self) { try await client.send(get(scripted.port, "/close"), timeout: .seconds(5)) }
        #expect(closed == .transport)
        let garbage = await #expect(throws: HTTPClientError.self) { try await client.send(get(scripted.port, "/junk"), timeout: .seconds(5)) }
        #expect(garbage == .transport)
        #expect(!(garbage?.description.contains("127.0.0.1") ?? true))
        client.shutdown()
        scripted.stop()
    }

    @Test func refusesAResponseLargerThanTheLimit() async throws {
        let server = try echoServer()
        let client = testClient()
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.send(
                get(server.port, "/", method: .post),
                body: [UInt8](repeating: 1, count: 100_000),
                timeout: .seconds(5),
                maxResponseBodySize: 1000
            )
        }
        #expect(error == .responseTooLarge)
        client.shutdown()
        await server.shutdown()
    }

    @Test func refusesPlainHTTPToANonLoopbackHostWithoutTouchingTheNetwork() async throws {
        let lenient = testClient()
        let remote = HTTPRequest(method: .get, scheme: "http", authority: "example.invalid", path: "/")
        await #expect(throws: HTTPClientError.insecureURLRefused) { try await lenient.send(remote, timeout: .seconds(5)) }
        let strict = HTTPClient()
        let server = try echoServer()
        await #expect(throws: HTTPClientError.insecureURLRefused) { try await strict.send(get(server.port, "/"), timeout: .seconds(5)) }
        let ftp = HTTPRequest(method: .get, scheme: "ftp", authority: "127.0.0.1", path: "/")
        await #expect(throws: HTTPClientError.invalidURL) { try await lenient.send(ftp, timeout: .seconds(5)) }
        let smuggled = HTTPRequest(method: .get, scheme: "https", authority: "user@127.0.0.1", path: "/")
        await #expect(throws: HTTPClientError.invalidURL) { try await lenient.send(smuggled, timeout: .seconds(5)) }
        // A loopback authority allowed once (and remembered) lets no other host through.
        #expect(try await lenient.send(get(server.port, "/"), timeout: .seconds(5)).head.status == .ok)
        await #expect(throws: HTTPClientError.insecureURLRefused) { try await lenient.send(remote, timeout: .seconds(5)) }
        let otherPort = HTTPRequest(method: .get, scheme: "HTTP", authority: "example.invalid:\(server.port)", path: "/")
        await #expect(throws: HTTPClientError.insecureURLRefused) { try await lenient.send(otherPort, timeout: .seconds(5)) }
        lenient.shutdown()
        strict.shutdown()
        await server.shutdown()
    }

    @Test func reportsTLSFailureForAServerThatDoesNotSpeakTLS() async throws {
        let server = try echoServer()
        let client = testClient()
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.send(get(server.port, "/", scheme: "https"), timeout: .seconds(5))
        }
        #expect(error == .tlsFailure)
        client.shutdown()
        await server.shutdown()
    }

    @Test func returnsRedirectsAsTheyAreByDefault() async throws {
        let scripted = try ScriptedHTTPServer { _ in
            .raw("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/elsewhere\r\nContent-Length: 0\r\n\r\n")
        }
        let client = testClient()
        let response = try await client.send(get(scripted.port, "/"), timeout: .seconds(5))
        #expect(response.head.status.code == 302)
        #expect(response.head.headerFields[.location] == "http://127.0.0.1:1/elsewhere")
        client.shutdown()
        scripted.stop()
    }

    @Test func cancelsTheTransferWhenTheTaskIsCancelled() async throws {
        let scripted = try ScriptedHTTPServer { _ in .hang }
        let client = testClient()
        let started = ContinuousClock.now
        let task = Task { try await client.send(get(scripted.port, "/"), timeout: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        await #expect(throws: HTTPClientError.cancelled) { try await task.value }
        #expect(ContinuousClock.now - started < .seconds(10))  // the request's own timeout is 30 s
        client.shutdown()
        scripted.stop()
    }

    @Test func failsInFlightRequestsWhenShutDown() async throws {
        let scripted = try ScriptedHTTPServer { _ in .hang }
        let client = testClient()
        let task = Task { try await client.send(get(scripted.port, "/"), timeout: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(100))
        client.shutdown()
        await #expect(throws: HTTPClientError.shutDown) { try await task.value }
        await #expect(throws: HTTPClientError.shutDown) { try await client.send(get(scripted.port, "/"), timeout: .seconds(1)) }
        scripted.stop()
    }

    /// `.invalid` never resolves (RFC 6761 §6.4): the error says DNS, is transient, and names no host.
    @Test func reportsDNSFailureForAHostThatDoesNotResolve() async throws {
        let client = testClient()
        let request = HTTPRequest(method: .get, scheme: "https", authority: "tokengate-test.invalid", path: "/")
        let error = await #expect(throws: HTTPClientError.self) { try await client.send(request, timeout: .seconds(10)) }
        #expect(error == .dnsFailure)
        #expect(error?.isTransient == true)
        #expect(error.map { !String(describing: $0).contains("tokengate-test") } == true)
        client.shutdown()
    }
}
