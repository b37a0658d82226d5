import Foundation
import HTTPTypes
import Synchronization
import TGHTTPServer
import TGTesting
import Testing

@Suite struct AsyncBridgeTests {
    @Test func answersAnAsyncHandlerThatFinishesWithoutSuspendingInlineWithoutSuspendingTheConnection() async throws {
        let server = try startServer(handler: { _ in
            .async { _ in ServerResponse(status: .ok, contentType: "text/plain", body: "inline") }
        })
        for _ in 0..<5 {
            let result = try await curl([server.baseURL + "/"])
            #expect(result.stdout == "inline")
        }
        #expect(server.suspendedRequestCount == 0)
        await server.shutdown()
    }

    @Test func suspendsTheConnectionWhileAnAsyncHandlerWaitsAndAnswersAfterwards() async throws {
        let server = try startServer(handler: { _ in
            .async { _ in
                try? await Task.sleep(for: .milliseconds(50))
                return ServerResponse(status: .accepted, contentType: "text/plain", body: "later")
            }
        })
        let result = try await curl(["-i", server.baseURL + "/"])
        #expect(result.stdout.hasPrefix("HTTP/1.1 202"))
        #expect(result.stdout.hasSuffix("later"))
        #expect(server.suspendedRequestCount == 1)
        await server.shutdown()
    }

    @Test func servesManySlowRequestsAtOnceWithTwoEventThreads() async throws {
        let server = try startServer(
            { $0.threads = 2 },
            handler: { _ in
                .async { _ in
                    try? await Task.sleep(for: .milliseconds(300))
                    return ServerResponse(status: .ok, contentType: "text/plain", body: "ok")
                }
            }
        )
        // curl's --parallel keeps 200 connections open at once against the server.
        let urls = (0..<200).flatMap { ["-o", "/dev/null", server.baseURL + "/\($0)"] }
        let started = ContinuousClock.now
        let result = try await curl(["--parallel", "--parallel-max", "200", "-w", "%{http_code}\n"] + urls)
        let elapsed = ContinuousClock.now - started
        let codes = result.stdout.split(separator: "\n")
        #expect(codes.count == 200)
        #expect(codes.allSatisfy { $0 == "200" })
        // Serially this would take 60 s; suspended connections overlap their waits (the bound is
        // loose: 200 curl transfers on a loaded 2-core machine take seconds by themselves).
        #expect(elapsed < .seconds(20))
        // Each loop counts its own; the server's figures are the sums over both loops.
        #expect(server.suspendedRequestCount == 200)
        #expect(server.requestsInFlight == 0)
        await server.shutdown()
    }

    @Test func answers503AndCancelsTheHandlerWhenItMissesTheRequestDeadline() async throws {
        let cancelled = Counter()
        let server = try startServer(
            { $0.requestTimeout = .milliseconds(200) },
            handler: { _ in
                .async { _ in
                    do {
                        try await Task.sleep(for: .seconds(30))
                    } catch {
                        cancelled.increment()
                    }
                    return ServerResponse(status: .ok)
                }
            }
        )
        let started = ContinuousClock.now
        let result = try await curl(["-i", server.baseURL + "/"])
        #expect(result.stdout.hasPrefix("HTTP/1.1 503"))
        #expect(result.stdout.contains(#""code":"request_timeout""#))
        // The handler sleeps 30 s: an answer well before that came from the 200 ms deadline (the
        // bound is loose because a loaded 2-core machine runs the whole suite at once).
        #expect(ContinuousClock.now - started < .seconds(10))
        for _ in 0..<100 where cancelled.value == 0 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(cancelled.value == 1)
        await server.shutdown()
    }

    /// A handler that answers on the loop later (``HTTPServer/Reply/deferred(_:)``, the proxy's
    /// cached path) waits under the request's deadline on its own loop, not on a shared registry.
    @Test func aDeferredRequestThatIsNeverAnsweredGets503AtItsDeadline() async throws {
        let server = try startServer(
            { $0.requestTimeout = .milliseconds(200) },
            handler: { request in
                request.path == "/never" ? .deferred { _ in } : .response(ServerResponse(status: .ok, contentType: "text/plain", body: "ok"))
            }
        )
        let started = ContinuousClock.now
        let result = try await curl(["-i", server.baseURL + "/never"])
        #expect(result.stdout.hasPrefix("HTTP/1.1 503"))
        #expect(result.stdout.contains(#""code":"request_timeout""#))
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(await server.requestsUnderDeadline() == 0)
        #expect(try await curl([server.baseURL + "/"]).stdout == "ok")
        await server.shutdown()
    }

    /// An answer that comes after the deadline's 503 is dropped; a body source it carries is
    /// closed, on its loop, so that what feeds it (the proxy's upstream exchange) stops.
    @Test func aLateAnswersBodySourceIsClosedOnItsLoop() async throws {
        final class Source: ResponseBodySource, Sendable {
            let closedOnLoop = Mutex<Bool?>(nil)
            func read(into buffer: UnsafeMutableRawBufferPointer) -> ResponseBodyRead { .end }
            func notify(when ready: @escaping () -> Void) { ready() }
            func close() {
                // The event loop threads are named `tg-loop-N`.
                let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                closedOnLoop.withLock { $0 = name.hasPrefix("tg-loop") }
            }
        }
        let source = Source()
        let server = try startServer(
            { $0.requestTimeout = .milliseconds(200) },
            handler: { _ in
                .deferred { responder in
                    DispatchQueue.global().asyncAfter(deadline: .now() + 0.5) {
                        responder.respond(ServerResponse(status: .ok, body: .source(source)))
                    }
                }
            }
        )
        let result = try await curl(["-i", server.baseURL + "/late"])
        #expect(result.stdout.hasPrefix("HTTP/1.1 503"))
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, source.closedOnLoop.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(5)) }
        #expect(source.closedOnLoop.withLock { $0 } == true)
        await server.shutdown()
    }

    /// Answered from another thread, a deferred request leaves its loop's deadlines (posted to the
    /// loop): none is left waiting once every answer is in, and none is answered twice.
    @Test func deferredRequestsAnsweredOnAndOffTheLoopLeaveTheirDeadlines() async throws {
        let server = try startServer(
            { $0.requestTimeout = .seconds(5) },
            handler: { request in
                .deferred { responder in
                    if request.path == "/here" {
                        responder.respond(ServerResponse(status: .ok, contentType: "text/plain", body: "here"))
                    } else {
                        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) {
                            responder.respond(ServerResponse(status: .ok, contentType: "text/plain", body: "there"))
                        }
                    }
                }
            }
        )
        let urls = (0..<20).flatMap { ["-o", "/dev/null", server.baseURL + ($0 % 2 == 0 ? "/here" : "/there")] }
        let result = try await curl(["--parallel", "-w", "%{http_code}\n"] + urls)
        #expect(result.stdout.split(separator: "\n") == Array(repeating: "200", count: 20))
        var waiting = await server.requestsUnderDeadline()
        for _ in 0..<100 where waiting > 0 {
            try await Task.sleep(for: .milliseconds(10))
            waiting = await server.requestsUnderDeadline()
        }
        #expect(waiting == 0)
        #expect(server.requestsInFlight == 0)
        await server.shutdown()
    }

    @Test func streamsABodyOfUnknownLengthAsChunks() async throws {
        let server = try startServer(handler: { _ in
            .response(
                ServerResponse(
                    status: .ok,
                    headerFields: [.contentType: "text/plain"],
                    body: .stream { writer in
                        for index in 0..<200 {
                            try await writer.write(Array("line \(index)\n".utf8))
                            if index % 50 == 0 { try await Task.sleep(for: .milliseconds(10)) }
                        }
                    }
                )
            )
        })
        let result = try await curl(["-i", server.baseURL + "/stream"])
        #expect(result.stdout.lowercased().contains("transfer-encoding: chunked"))
        let body = result.stdout.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        #expect(body == (0..<200).map { "line \($0)\n" }.joined())
        await server.shutdown()
    }

    @Test func streamsALargeBodyThroughTheBoundedBuffer() async throws {
        let chunk = [UInt8](repeating: 0x61, count: 64 * 1024)
        let server = try startServer(handler: { _ in
            .response(
                ServerResponse(
                    status: .ok,
                    body: .stream { writer in
                        for _ in 0..<256 { try await writer.write(chunk) }  // 16 MiB
                    }
                )
            )
        })
        let result = try await curl(["-o", "/dev/null", "-w", "%{size_download}", server.baseURL + "/big"])
        #expect(result.stdout == "\(256 * 64 * 1024)")
        await server.shutdown()
    }

    @Test func drainsInFlightRequestsOnShutdownAndThenRefusesConnections() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.threads = 2
        let server = HTTPServer(configuration: configuration) { _ in
            .async { _ in
                try? await Task.sleep(for: .milliseconds(400))
                return ServerResponse(status: .ok, contentType: "text/plain", body: "drained")
            }
        }
        try server.start()
        let url = server.baseURL + "/"
        async let slow = curl([url])
        while server.requestsInFlight == 0 { try await Task.sleep(for: .milliseconds(5)) }
        await server.shutdown()
        let drained = try await slow
        #expect(drained.stdout == "drained")
        #expect(server.requestsInFlight == 0)
        let after = try await curl([url])
        #expect(after.exitCode == 7)  // couldn't connect
    }
}
