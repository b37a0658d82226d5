import HTTPTypes
import Synchronization
import TGEventLoop
import TGHTTPServer
import TGTesting
import Testing

@testable import TGHTTPClient
@testable import TGProxy

/// A server and a client on the same loops: a request answered by a call to another server,
/// made and read on the loop that serves it (the cached proxy path's machinery).
@Suite struct LoopExchangeTests {
    /// Front server relaying every request to `upstreamPort` through a client on its own loop.
    final class Relay: Sendable {
        let loops = EventLoopGroup(count: 2)
        let clients: [HTTPClient]
        let server: HTTPServer
        let servedOnLoop = Atomic<Int>(0)

        init(upstreamPort: UInt16, headTimeout: Duration, idleTimeout: Duration) throws {
            let clients = loops.loops.map { loop in
                var configuration = HTTPClient.Configuration()
                configuration.allowPlainHTTPToLoopbackForTesting = true
                return HTTPClient(configuration: configuration, loop: loop)
            }
            self.clients = clients
            var configuration = HTTPServer.Configuration()
            configuration.requestTimeout = .seconds(60)
            let counter = Counter()
            server = HTTPServer(configuration: configuration, loops: loops) { request in
                .deferred { responder in
                    guard let loop = request.loop, loop.inEventLoop else {
                        responder.respond(ServerResponse(status: .internalServerError))
                        return
                    }
                    counter.value.add(1, ordering: .relaxed)
                    do {
                        let upstream = LoopRequest(
                            method: "GET",
                            scheme: "http",
                            authority: "127.0.0.1:\(upstreamPort)",
                            path: request.head.path ?? "/",
                            headers: HeaderLines()
                        )
                        let exchange = try clients[loop.index].startOnLoop(
                            upstream,
                            headTimeout: headTimeout,
                            idleTimeout: idleTimeout
                        )
                        exchange.onHead = { [unowned exchange] result in
                            switch result {
                            case .success(let head):
                                responder.respond(ServerResponse(status: head.parse().status, body: .source(ExchangeBody(exchange))))
                            case .failure(let error):
                                responder.respond(ServerResponse(status: error == .timeout ? .gatewayTimeout : .badGateway))
                            }
                        }
                    } catch {
                        responder.respond(ServerResponse(status: .badGateway))
                    }
                }
            }
            counterRef = counter
            try server.start()
        }

        let counterRef: Counter

        func stop() async {
            await server.shutdown()
            for client in clients { client.shutdown() }
            loops.stop()
        }
    }

    final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    static func upstream(_ handler: @escaping HTTPServer.Handler) throws -> HTTPServer {
        var configuration = HTTPServer.Configuration()
        configuration.threads = 1
        let server = HTTPServer(configuration: configuration, handler: handler)
        try server.start()
        return server
    }

    /// Requests on the loop reuse easy handles: each request's own authority, path and query (or
    /// none) reach the right server exactly as given (percent-encodings keep their case, an empty
    /// query its `?`), and a fragment never does. (libcurl 7.88 lowercases percent-encodings when
    /// a URL's path is set part by part with `curl_url_set`.) The same for each way libcurl gets
    /// the URL: a kept origin and the request target, an origin parsed per transfer (past the
    /// cache's capacity) and the target, and the whole URL (a client that follows redirects).
    @Test(arguments: [(originCapacity: 16, followRedirects: false), (0, false), (16, true)])
    func reusedHandlesSendEachRequestsAuthorityPathAndQueryAsGiven(originCapacity: Int, followRedirects: Bool) async throws {
        let echo: HTTPServer.Handler = { request in
            .response(ServerResponse(status: .ok, headerFields: [HTTPField.Name("X-Target")!: request.target, .server: request.authority ?? "-"]))
        }
        let first = try Self.upstream(echo)
        let second = try Self.upstream(echo)
        var configuration = HTTPClient.Configuration()
        configuration.allowPlainHTTPToLoopbackForTesting = true
        configuration.maxConnections = 1
        configuration.originCapacity = originCapacity
        configuration.followRedirects = followRedirects
        let client = HTTPClient(configuration: configuration)
        let calls: [(port: UInt16, target: String, sent: String)] = [
            (first.port, "/a/b?x=1&y=%20", "/a/b?x=1&y=%20"), (first.port, "/c", "/c"), (second.port, "/d?q", "/d?q"),
            (second.port, "/e?z=2#fragment", "/e?z=2"), (first.port, "/f%2Fg#frag", "/f%2Fg"), (first.port, "/h?", "/h?"),
            (first.port, "/%C3%A9?v=%C3%A9", "/%C3%A9?v=%C3%A9"),
        ]
        for call in calls {
            let seen: (target: String?, host: String?) = try await withCheckedThrowingContinuation { continuation in
                _ = client.loop.execute {
                    do {
                        let request = LoopRequest(
                            method: "GET",
                            scheme: "http",
                            authority: "127.0.0.1:\(call.port)",
                            path: call.target,
                            headers: HeaderLines()
                        )
                        let exchange = try client.startOnLoop(request, headTimeout: .seconds(5), idleTimeout: .seconds(5))
                        exchange.onHead = { [exchange] result in
                            _ = exchange
                            switch result {
                            case .success(let head):
                                let fields = head.parse().headerFields
                                continuation.resume(returning: (fields[HTTPField.Name("X-Target")!], fields[.server]))
                            case .failure(let error):
                                continuation.resume(throwing: error)
                            }
                        }
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
            #expect(seen.target == call.sent, "\(call.target)")
            #expect(seen.host == "127.0.0.1:\(call.port)", "\(call.target)")
        }
        client.shutdown()
        await first.shutdown()
        await second.shutdown()
    }

    /// A handle lent again keeps the memory of its last request's header list and of the head it
    /// last received: each request still sends exactly its own lines, and each answer's fields
    /// are its own, whether longer or shorter than the last (the same handle every time: one
    /// connection).
    @Test func aReusedHandleSendsItsOwnHeaderLinesAndReadsItsOwnAnswerWhateverTheLastOnesLength() async throws {
        // Answers with a field per `X-Test-N` line received, in order: `X-Answer-N: <value>`.
        let upstream = try Self.upstream { request in
            var fields = HTTPFields()
            for field in request.head.headerFields where field.name.canonicalName.hasPrefix("x-test-") {
                fields.append(HTTPField(name: HTTPField.Name("X-Answer-" + field.name.canonicalName.dropFirst(7))!, value: field.value))
            }
            return .response(ServerResponse(status: .ok, headerFields: fields))
        }
        var configuration = HTTPClient.Configuration()
        configuration.allowPlainHTTPToLoopbackForTesting = true
        configuration.maxConnections = 1
        let client = HTTPClient(configuration: configuration)
        for (round, count) in [1, 12, 0, 3, 12, 2].enumerated() {
            let sent = (0..<count).map { line in
                (name: "X-Test-\(line)", value: String(repeating: Character(UnicodeScalar(97 + (round + line) % 26)!), count: 20 + 40 * line))
            }
            var lines = HeaderLines()
            for line in sent {
                let appended = lines.append(name: line.name, value: line.value)
                #expect(appended)
            }
            let request = LoopRequest(method: "GET", scheme: "http", authority: "127.0.0.1:\(upstream.port)", path: "/", headers: lines)
            let answered: [(String, String)] = try await withCheckedThrowingContinuation { continuation in
                _ = client.loop.execute {
                    do {
                        let exchange = try client.startOnLoop(request, headTimeout: .seconds(5), idleTimeout: .seconds(5))
                        exchange.onHead = { [exchange] result in
                            _ = exchange
                            switch result {
                            case .success(let head):
                                let fields = head.parse().headerFields.filter { $0.name.canonicalName.hasPrefix("x-answer-") }
                                continuation.resume(returning: fields.map { (String($0.name.canonicalName.dropFirst(9)), $0.value) })
                            case .failure(let error):
                                continuation.resume(throwing: error)
                            }
                        }
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
            #expect(answered.map(\.0) == sent.map { String($0.name.dropFirst(7)) }, "round \(round)")
            #expect(answered.map(\.1) == sent.map(\.value), "round \(round)")
        }
        client.shutdown()
        await upstream.shutdown()
    }

    /// The loop remembers the origin its last call went to (so it is not checked on every call),
    /// but every call's path is still checked, and another origin is checked again in full.
    @Test func callsAfterAnAllowedOneAreCheckedAsTheFirstWas() async throws {
        let upstream = try Self.upstream { _ in .response(ServerResponse(status: .ok)) }
        var configuration = HTTPClient.Configuration()
        configuration.allowPlainHTTPToLoopbackForTesting = true
        let client = HTTPClient(configuration: configuration)
        let authority = "127.0.0.1:\(upstream.port)"
        let calls: [(scheme: String, authority: String, path: String, refusal: HTTPClientError?)] = [
            ("http", authority, "/first", nil), ("http", authority, "/a b", .invalidURL), ("http", authority, "/a\rb", .invalidURL),
            ("http", authority, "no-slash", .invalidURL), ("http", "192.0.2.1:\(upstream.port)", "/x", .insecureURLRefused),
            ("ftp", authority, "/x", .invalidURL), ("http", "user@\(authority)", "/x", .invalidURL), ("http", authority, "/again", nil),
        ]
        for call in calls {
            let refusal: HTTPClientError? = await client.loop.run {
                do {
                    let request = LoopRequest(method: "GET", scheme: call.scheme, authority: call.authority, path: call.path, headers: HeaderLines())
                    _ = try client.startOnLoop(request, headTimeout: .seconds(5), idleTimeout: .seconds(5)).cancel()
                    return nil
                } catch {
                    return error as? HTTPClientError ?? HTTPClientError(.transport, detail: "\(error)")
                }
            }
            #expect(refusal == call.refusal, "\(call.scheme)://\(call.authority)\(call.path)")
        }
        client.shutdown()
        await upstream.shutdown()
    }

    @Test func aSlowReaderGetsTheWholeBodyThoughItsPausesExceedTheIdleTimeout() async throws {
        let chunk = [UInt8](repeating: 0x42, count: 64 * 1024)
        let upstream = try Self.upstream { _ in
            .response(ServerResponse(status: .ok, body: .stream { writer in for _ in 0..<128 { try await writer.write(chunk) } }))
        }
        let relay = try Relay(upstreamPort: upstream.port, headTimeout: .seconds(5), idleTimeout: .milliseconds(300))
        let client = testClient()
        let clock = ContinuousClock()
        let started = clock.now
        let response = try await ExchangeReader.start(client, get(relay.server.port, "/big"), idleTimeout: .seconds(60))
        #expect(response.head.status == .ok)
        // The reader stalls for longer than the relay's idle timeout, four times over (each
        // stall alone would have cut an idle transfer).
        let (total, stalls) = try await response.readStalling(4, for: .milliseconds(400))
        #expect(stalls == 4)
        #expect(total == 8 << 20)
        #expect(clock.now - started > .milliseconds(900))
        #expect(relay.counterRef.value.load(ordering: .relaxed) == 1)
        client.shutdown()
        await relay.stop()
        await upstream.shutdown()
    }

    /// A call started from inside libmicrohttpd's run (after the loop's client already had its
    /// turn that round: many connections ready at once) must start at once; the loop may not
    /// sleep until some unrelated event.
    @Test func manyConcurrentCallsNeverWaitForAnUnrelatedEvent() async throws {
        let upstream = try Self.upstream { _ in .response(ServerResponse(status: .ok, contentType: "text/plain", body: "ok")) }
        let relay = try Relay(upstreamPort: upstream.port, headTimeout: .seconds(5), idleTimeout: .seconds(5))
        let url = "http://127.0.0.1:\(relay.server.port)/n"
        let clock = ContinuousClock()
        let started = clock.now
        let result = try await curl(["-s", "-w", "%{http_code}\\n", "--parallel", "--parallel-max", "32"] + Array(repeating: url, count: 400))
        #expect(result.stdout.split(separator: "\n").filter { $0.hasSuffix("200") }.count == 400)
        #expect(clock.now - started < .seconds(5))
        await relay.stop()
        await upstream.shutdown()
    }

    @Test func aLateHeadIsATimeoutAtTheHeadDeadline() async throws {
        let gate = TestGate()
        let upstream = try Self.upstream { _ in
            .async { _ in
                await gate.wait()
                return ServerResponse(status: .ok)
            }
        }
        let relay = try Relay(upstreamPort: upstream.port, headTimeout: .milliseconds(300), idleTimeout: .seconds(5))
        let client = testClient()
        let clock = ContinuousClock()
        let started = clock.now
        let response = try await client.send(get(relay.server.port, "/late"), timeout: .seconds(10))
        #expect(response.head.status == .gatewayTimeout)
        #expect(clock.now - started < .seconds(2))
        gate.open()
        client.shutdown()
        await relay.stop()
        await upstream.shutdown()
    }

    /// The exchange is its transfer's object, but the easy handle goes back to the pool when the
    /// transfer ends, not when the exchange goes: an exchange still held (its body not yet read
    /// out) keeps no handle from the next call.
    @Test func anEndedTransfersHandleIsBackInThePoolWhileItsExchangeLivesOn() async throws {
        let upstream = try Self.upstream { _ in .response(ServerResponse(status: .ok, body: .bytes(Array("hello".utf8)))) }
        let client = testClient()
        let reader = try await ExchangeReader.start(client, get(upstream.port, "/"), idleTimeout: .seconds(10), wholeBodyUpTo: 64)
        #expect(reader.completeAtHead)
        #expect(client.handles.spareCount == 1)
        #expect(try await reader.collect(upTo: 64) == Array("hello".utf8))
        client.shutdown()
        await upstream.shutdown()
    }

    /// One timer watches the heads of all a client's exchanges: a short head deadline started
    /// after a long one still expires at its own time, a head that arrived never expires, the
    /// timer is set again after it fired, and the long one expires at its own time too.
    @Test func eachLateHeadExpiresAtItsOwnDeadlineWhateverTheOthersAre() async throws {
        let gate = TestGate()
        let upstream = try Self.upstream { request in
            if request.head.path == "/fast" { return .response(ServerResponse(status: .ok)) }
            return .async { _ in
                await gate.wait()
                return ServerResponse(status: .ok)
            }
        }
        let client = testClient()
        let clock = ContinuousClock()
        // How long the head took to fail with a timeout (nil: it arrived, or failed otherwise).
        @Sendable func timedOut(_ path: String, _ timeout: Duration) async -> Duration? {
            let started = clock.now
            do {
                _ = try await ExchangeReader.start(client, get(upstream.port, path), headTimeout: timeout, idleTimeout: .seconds(10))
                return nil
            } catch {
                return error as? HTTPClientError == .timeout ? clock.now - started : nil
            }
        }
        let long = Task { await timedOut("/long", .seconds(3)) }
        try await Task.sleep(for: .milliseconds(100))
        let short = await timedOut("/short", .milliseconds(300))
        #expect(short.map { $0 >= .milliseconds(250) && $0 < .milliseconds(1500) } == true, "\(String(describing: short))")
        #expect(await timedOut("/fast", .milliseconds(300)) == nil)
        let again = await timedOut("/short-again", .milliseconds(300))
        #expect(again.map { $0 >= .milliseconds(250) && $0 < .milliseconds(1500) } == true, "\(String(describing: again))")
        let longTook = await long.value
        #expect(longTook.map { $0 >= .milliseconds(2900) && $0 < .seconds(5) } == true, "\(String(describing: longTook))")
        gate.open()
        client.shutdown()
        await upstream.shutdown()
    }

    @Test func anUpstreamGoingQuietMidBodyIsCutAtTheIdleTimeout() async throws {
        let gate = TestGate()
        let upstream = try Self.upstream { _ in answerThatGoesQuiet(until: gate) }
        let relay = try Relay(upstreamPort: upstream.port, headTimeout: .seconds(5), idleTimeout: .milliseconds(300))
        let client = testClient()
        let clock = ContinuousClock()
        let started = clock.now
        let response = try await ExchangeReader.start(client, get(relay.server.port, "/quiet"), idleTimeout: .seconds(10))
        #expect(response.head.status == .ok)
        await #expect(throws: HTTPClientError.self) {
            while try await response.next() != nil {}
        }
        #expect(clock.now - started < .seconds(2))
        gate.open()
        client.shutdown()
        await relay.stop()
        await upstream.shutdown()
    }
}
