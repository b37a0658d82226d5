import Foundation
import HTTPTypes
import TGTesting
import Testing

@testable import TGHTTPClient

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

    /// A recycled handle is given only the options that differ from its last request's (the
    /// origin, a method or body, a timeout): alternating origins, methods and bodies on one
    /// handle, every request still goes where it should, as it should, with nothing of the one
    /// before it.
    @Test func aRecycledHandleSetOnlyWhatChangedStillSendsEachRequestAsItIs() async throws {
        let logA = RequestLog()
        let logB = RequestLog()
        let a = try ScriptedHTTPServer { request in
            logA.append(request)
            return .raw("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
        }
        let b = try ScriptedHTTPServer { request in
            logB.append(request)
            return .raw("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb")
        }
        let client = testClient()
        func call(_ server: ScriptedHTTPServer, _ path: String, method: HTTPRequest.Method = .get, body: [UInt8]? = nil) async throws -> String {
            var request = get(server.port, path, method: method)
            if body != nil { request.headerFields[.authorization] = "Bearer upstream-secret" }
            let response = try await ExchangeReader.start(client, request, body: body.map { .bytes($0) } ?? .none, idleTimeout: .seconds(5))
            return String(decoding: try await response.collect(upTo: 100), as: UTF8.self)
        }
        #expect(try await call(a, "/1") == "a")
        #expect(try await call(b, "/2") == "b")
        #expect(try await call(a, "/3") == "a")
        #expect(try await call(a, "/4", method: .put, body: Array("payload".utf8)) == "a")
        #expect(try await call(a, "/5") == "a")
        #expect(try await call(b, "/6", method: .head) == "")
        #expect(try await call(b, "/7") == "b")
        #expect(try await call(a, "/8") == "a")
        _ = try await client.send(get(a.port, "/9"), timeout: .seconds(5))
        #expect(try await call(a, "/10") == "a")
        #expect(logA.all.map { "\($0.method) \($0.target)" } == ["GET /1", "GET /3", "PUT /4", "GET /5", "GET /8", "GET /9", "GET /10"])
        #expect(logB.all.map { "\($0.method) \($0.target)" } == ["GET /2", "HEAD /6", "GET /7"])
        for request in logA.all + logB.all where request.method != "PUT" {
            #expect(request.body.isEmpty)
            #expect(request.header("Authorization") == nil)
            #expect(request.header("Content-Length") == nil)
        }
        #expect(logA.all[2].body == Array("payload".utf8))
        client.shutdown()
        a.stop()
        b.stop()
    }

    /// A connection back in libcurl's pool keeps its socket in the loop's epoll set (no
    /// `epoll_ctl` per request). When the upstream drops it while idle, the socket leaves the set
    /// at once, and the next request opens a new connection: nothing hangs and nothing leaks.
    @Test func anIdleConnectionTheUpstreamDropsLeavesTheEpollSetAndTheNextRequestReconnects() async throws {
        let log = RequestLog()
        let scripted = try ScriptedHTTPServer { request in
            log.append(request)
            return .rawThenClose("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
        let client = testClient()
        for _ in 0..<5 {
            let response = try await client.send(get(scripted.port, "/read"), timeout: .seconds(5))
            #expect(response.body == Array("ok".utf8))
            // The dropped connection's socket reports end-of-file while parked and is let go.
            var left = await client.socketsInEpollSet()
            for _ in 0..<500 where left > 0 {
                try await Task.sleep(for: .milliseconds(2))
                left = await client.socketsInEpollSet()
            }
            #expect(left == 0)
        }
        #expect(log.all.count == 5)
        client.shutdown()
        scripted.stop()
    }

    /// A connection the upstream keeps is reused by the next request, its socket still watched
    /// (parked between requests, never added twice).
    @Test func aKeptConnectionStaysInTheEpollSetBetweenRequests() async throws {
        let scripted = try ScriptedHTTPServer { _ in .raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
        let client = testClient()
        for _ in 0..<20 {
            let response = try await client.send(get(scripted.port, "/read"), timeout: .seconds(5))
            #expect(response.body == Array("ok".utf8))
            #expect(await client.socketsInEpollSet() == 1)
        }
        #expect(scripted.acceptedConnections == 1)
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
