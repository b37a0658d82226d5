import Foundation
import HTTPTypes
import TGHTTPClient
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The requests a scripted server received, in order.
final class RequestLog: @unchecked Sendable {
    // Invariant: `entries` is only accessed with `lock` held.
    private let lock = NSLock()
    private var entries: [ScriptedHTTPServer.Request] = []
    func append(_ request: ScriptedHTTPServer.Request) { lock.withLock { entries.append(request) } }
    var all: [ScriptedHTTPServer.Request] { lock.withLock { entries } }
}

@Suite struct ClientIsolationTests {
    /// Easy handles are recycled: a request must carry nothing of the one before it on the same
    /// handle (method, body, headers such as an upstream token).
    @Test func aRecycledHandleCarriesNothingOfItsPreviousRequest() async throws {
        let log = RequestLog()
        let scripted = try ScriptedHTTPServer { request in
            log.append(request)
            return .raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
        let client = testClient()
        for _ in 0..<3 {
            var put = get(scripted.port, "/write", method: .put)
            put.headerFields[.authorization] = "Bearer upstream-secret"
            put.headerFields[HTTPField.Name("X-Extra")!] = "1"
            _ = try await client.send(put, body: Array("payload".utf8), timeout: .seconds(5))
            _ = try await client.send(get(scripted.port, "/read"), timeout: .seconds(5))
            _ = try await client.send(get(scripted.port, "/head", method: .head), timeout: .seconds(5))
        }
        let requests = log.all
        #expect(requests.count == 9)
        for (index, request) in requests.enumerated() {
            switch index % 3 {
            case 0:
                #expect(request.method == "PUT")
                #expect(request.body == Array("payload".utf8))
                #expect(request.header("Authorization") == "Bearer upstream-secret")
            default:
                #expect(request.method == (index % 3 == 1 ? "GET" : "HEAD"))
                #expect(request.body.isEmpty)
                #expect(request.header("Authorization") == nil)
                #expect(request.header("X-Extra") == nil)
                #expect(request.header("Content-Length") == nil)
            }
        }
        client.shutdown()
        scripted.stop()
    }

    /// TokenGate talks to the hosts it is configured for, directly: `http_proxy` in its
    /// environment must not divert (or break) its requests.
    @Test func ignoresProxiesNamedByTheEnvironment() async throws {
        let scripted = try ScriptedHTTPServer { _ in .raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
        let client = testClient()
        setenv("http_proxy", "http://127.0.0.1:1", 1)
        setenv("HTTP_PROXY", "http://127.0.0.1:1", 1)
        defer {
            unsetenv("http_proxy")
            unsetenv("HTTP_PROXY")
        }
        let response = try await client.send(get(scripted.port, "/"), timeout: .seconds(5))
        #expect(response.head.status == .ok)
        #expect(scripted.receivedRequests == 1)
        client.shutdown()
        scripted.stop()
    }
}
