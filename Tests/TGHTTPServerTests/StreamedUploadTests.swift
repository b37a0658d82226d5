import Foundation
import HTTPTypes
import Synchronization
import TGHTTPServer
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Request bodies of routes with `streamsBody`: read while they arrive, with back-pressure.
@Suite(.serialized) struct StreamedUploadTests {
    /// Streams `/up…` paths with the given limits; every other path keeps the buffered body.
    static func start(
        maxBodySize: Int = 1 << 20,
        requestTimeout: Duration = .seconds(30),
        handler: @escaping HTTPServer.Handler
    ) throws -> HTTPServer {
        try startServer(
            { configuration in
                configuration.limits = { _, path in
                    path.hasPrefix("/up")
                        ? HTTPServer.RequestLimits(maxBodySize: maxBodySize, requestTimeout: requestTimeout, streamsBody: true) : nil
                }
            },
            handler: handler
        )
    }

    @Test func aSlowlyReadSixtyFourMebibyteUploadArrivesInOrderWhileMemoryStaysBounded() async throws {
        let size = 64 << 20
        let (file, expected) = try Self.patternFile(mebibytes: size >> 20)
        defer { try? FileManager.default.removeItem(at: file) }
        let server = try Self.start(maxBodySize: 128 << 20) { request in
            .async { request in
                var checksum = Fletcher()
                var nextPause = 1 << 20
                do {
                    for try await chunk in request.bodyStream! {
                        checksum.add(chunk)
                        // A slow reader: 20 ms per MiB, far slower than loopback.
                        if checksum.count >= nextPause {
                            nextPause += 1 << 20
                            try await Task.sleep(for: .milliseconds(20))
                        }
                    }
                } catch {
                    return ServerResponse(status: .badRequest, contentType: "text/plain", body: "\(error)")
                }
                return ServerResponse(status: .ok, contentType: "text/plain", body: "\(checksum.count) \(checksum.value)")
            }
        }
        let baseline = residentBytes()
        let peak = Mutex(baseline)
        let sampler = Task {
            while !Task.isCancelled {
                let now = residentBytes()
                peak.withLock { $0 = max($0, now) }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let result = try await curl([
            "--max-time", "120", "-H", "Content-Type: application/octet-stream", "--data-binary", "@" + file.path,
            server.baseURL + "/upload",
        ])
        sampler.cancel()
        #expect(result.stdout == "\(size) \(expected.value)", "\(result.stdout) \(result.stderr)")
        let growth = peak.withLock { $0 } - baseline
        #expect(growth < 16 << 20, "resident memory grew by \(growth >> 20) MiB while 64 MiB were uploaded")
        #expect(server.uploadPauseCount > 10, "the slow reader never paused the upload")
        #expect(server.requestsInFlight == 0)
        await server.shutdown()
    }

    @Test func aBodyOverTheLimitIsRefused413BeforeOrWhileStreamingAndFarBeyondItTheConnectionIsClosed() async throws {
        let errors = Mutex<[String]>([])
        let server = try Self.start(maxBodySize: 1 << 20) { _ in
            .async { request in
                do {
                    for try await _ in request.bodyStream! {}
                } catch let error as HTTPServerError {
                    errors.withLock { $0.append("\(error)") }
                    let status: HTTPResponse.Status = error == .bodyTooLarge ? .contentTooLarge : .badRequest
                    return ServerResponse(status: status, contentType: "text/plain", body: "refused")
                } catch {
                    return ServerResponse(status: .internalServerError)
                }
                return ServerResponse(status: .ok, contentType: "text/plain", body: "read")
            }
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-up-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        func upload(_ bytes: Int, chunked: Bool) async throws -> CurlResult {
            try Data(repeating: 0x42, count: bytes).write(to: file)
            return try await curl(
                ["-o", "/dev/null", "-w", "%{http_code}", "-H", "Expect:", "--data-binary", "@" + file.path, server.baseURL + "/upload"]
                    + (chunked ? ["-H", "Transfer-Encoding: chunked"] : [])
            )
        }
        // Announced too large: 413 from the server itself, the handler never runs.
        #expect(try await upload(2 << 20, chunked: false).stdout == "413")
        #expect(errors.withLock { $0 }.isEmpty)
        // Within the limit, chunked: read in full.
        #expect(try await upload(1 << 20, chunked: true).stdout == "200")
        // Chunked past the limit: the stream throws bodyTooLarge, the handler's 413 goes out after
        // the rest is dropped.
        #expect(try await upload(3 << 19, chunked: true).stdout == "413")
        #expect(errors.withLock { $0 } == ["\(HTTPServerError.bodyTooLarge)"])
        // Far past it: the connection is closed instead of reading on.
        let cut = try await upload(8 << 20, chunked: true)
        #expect(cut.stdout == "000", "\(cut.stdout) \(cut.stderr)")
        try await waitUntil { server.requestsInFlight == 0 }
        await server.shutdown()
    }

    @Test func aClientThatDisconnectsMidUploadEndsTheStreamWithClientGoneAndFreesTheRequest() async throws {
        let outcome = Mutex<String?>(nil)
        let received = Mutex(0)
        let server = try Self.start { _ in
            .async { request in
                do {
                    for try await chunk in request.bodyStream! { received.withLock { $0 += chunk.count } }
                    outcome.withLock { $0 = "ended" }
                } catch {
                    outcome.withLock { $0 = "\(error)" }
                }
                return ServerResponse(status: .ok)
            }
        }
        let connection = try RawConnection(port: server.port)
        try await connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        try await connection.send(String(repeating: "a", count: 100_000))
        try await waitUntil { received.withLock { $0 } == 100_000 }
        shutdown(connection.fd, Int32(SHUT_RDWR))
        try await waitUntil { outcome.withLock { $0 } != nil && server.requestsInFlight == 0 }
        #expect(outcome.withLock { $0 } == "\(HTTPServerError.clientGone)")
        #expect(server.requestsInFlight == 0)
        await server.shutdown()
    }

    @Test func aHandlerThatAnswersBeforeReadingTheBodyIsAnsweredAfterItAndTheConnectionStaysUsable() async throws {
        let server = try Self.start { request in
            if request.path == "/plain" { return .response(ServerResponse(status: .ok)) }
            if request.path == "/up/sync" {
                return .response(ServerResponse(status: .forbidden, contentType: "text/plain", body: "no"))
            }
            return .async { _ in
                try? await Task.sleep(for: .milliseconds(20))
                return ServerResponse(status: .unauthorized, contentType: "text/plain", body: "who")
            }
        }
        let connection = try RawConnection(port: server.port)
        let body = String(repeating: "b", count: 600_000)
        for (path, status) in [("/up/sync", "403"), ("/up/async", "401"), ("/up/sync", "403")] {
            try await connection.send("PUT \(path) HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
            let response = try await connection.readResponse()
            #expect(response.hasPrefix("HTTP/1.1 \(status)"), "\(response)")
            #expect(!response.lowercased().contains("connection: close"))
        }
        // The same connection serves a buffered request afterwards.
        try await connection.send("POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        #expect(try await connection.readResponse().hasPrefix("HTTP/1.1 200"))
        await server.shutdown()
    }

    @Test func aReaderPastTheDeadlineGets503AndTheStreamThrowsRequestTimedOut() async throws {
        let outcome = Mutex<String?>(nil)
        let server = try Self.start(requestTimeout: .milliseconds(300)) { _ in
            .async { request in
                var iterator = request.bodyStream!.makeAsyncIterator()
                do {
                    _ = try await iterator.next()
                    try? await Task.sleep(for: .seconds(5))
                    while try await iterator.next() != nil {}
                    outcome.withLock { $0 = "ended" }
                } catch {
                    outcome.withLock { $0 = "\(error)" }
                }
                return ServerResponse(status: .ok)
            }
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-up-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(repeating: 0x43, count: 1 << 20).write(to: file)
        let started = ContinuousClock.now
        let result = try await curl(["-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@" + file.path, server.baseURL + "/upload"])
        #expect(result.stdout == "503")
        #expect(ContinuousClock.now - started < .seconds(3))
        try await waitUntil { outcome.withLock { $0 } != nil }
        #expect(outcome.withLock { $0 } == "\(HTTPServerError.requestTimedOut)")
        await server.shutdown()
    }

    @Test func anUploadThatKeepsArrivingOutlastsTheRequestDeadline() async throws {
        let server = try Self.start(requestTimeout: .milliseconds(300)) { _ in
            .async { request in
                var count = 0
                do {
                    for try await chunk in request.bodyStream! { count += chunk.count }
                } catch {
                    return ServerResponse(status: .badRequest, contentType: "text/plain", body: "\(error)")
                }
                return ServerResponse(status: .ok, contentType: "text/plain", body: "\(count)")
            }
        }
        let connection = try RawConnection(port: server.port)
        let started = ContinuousClock.now
        try await connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 120000\r\n\r\n")
        for _ in 0..<12 {
            // Four times the deadline in all, but never 300 ms without a byte.
            try await Task.sleep(for: .milliseconds(100))
            try await connection.send(String(repeating: "u", count: 10_000))
        }
        let response = try await connection.readResponse()
        #expect(response.hasPrefix("HTTP/1.1 200"), "\(response)")
        #expect(response.hasSuffix("120000"))
        #expect(ContinuousClock.now - started > .milliseconds(1100))
        await server.shutdown()
    }

    @Test func routesWithoutTheFlagStillGetTheWholeBodyAndNoStream() async throws {
        let server = try Self.start { request in
            let streams = request.bodyStream != nil
            return .response(ServerResponse(status: .ok, contentType: "text/plain", body: "\(request.body.count) \(streams)"))
        }
        let result = try await curl(["--data-binary", String(repeating: "z", count: 5000), server.baseURL + "/plain"])
        #expect(result.stdout == "5000 false")
        let streamed = try await curl(["--data-binary", "abc", server.baseURL + "/upload"])
        #expect(streamed.stdout == "0 true")
        await server.shutdown()
    }

    @Test func bodilessAndSmallAnnouncedBodiesAreReadWholeEvenOnStreamingRoutes() async throws {
        let server = try startServer(
            { configuration in
                configuration.limits = { _, _ in
                    HTTPServer.RequestLimits(maxBodySize: 1 << 20, requestTimeout: .seconds(30), streamsBody: true, buffersBodiesUpTo: 100)
                }
            },
            handler: { request in
                let streams = request.bodyStream != nil
                return .response(ServerResponse(status: .ok, contentType: "text/plain", body: "\(request.body.count) \(streams)"))
            }
        )
        #expect(try await curl([server.baseURL + "/up"]).stdout == "0 false")
        #expect(try await curl(["--data-binary", String(repeating: "s", count: 100), server.baseURL + "/up"]).stdout == "100 false")
        #expect(try await curl(["--data-binary", String(repeating: "s", count: 101), server.baseURL + "/up"]).stdout == "0 true")
        let chunked = try await curl(["-H", "Transfer-Encoding: chunked", "--data-binary", "abc", server.baseURL + "/up"])
        #expect(chunked.stdout == "0 true")
        await server.shutdown()
    }

    // MARK: - Helpers

    /// A file of `mebibytes` MiB: one random MiB repeated, each copy numbered in its first bytes,
    /// and its checksum.
    static func patternFile(mebibytes: Int) throws -> (URL, Fletcher) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-up-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        var block = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255) }
        var checksum = Fletcher()
        for index in 0..<mebibytes {
            block[0] = UInt8(truncatingIfNeeded: index)
            block[1] = UInt8(truncatingIfNeeded: index >> 8)
            checksum.add(block)
            try handle.write(contentsOf: block)
        }
        return (file, checksum)
    }

    /// Polls `condition` for up to five seconds.
    func waitUntil(_ condition: () -> Bool) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
    }
}

/// An order-sensitive checksum (Fletcher-style, modulo 2^64), cheap enough for 64 MiB in a debug build.
struct Fletcher {
    private var low: UInt64 = 0
    private var high: UInt64 = 0
    private(set) var count = 0

    mutating func add(_ bytes: [UInt8]) {
        var low = self.low
        var high = self.high
        bytes.withUnsafeBufferPointer { buffer in
            for byte in buffer {
                low &+= UInt64(byte)
                high &+= low
            }
        }
        self.low = low
        self.high = high
        count += bytes.count
    }

    var value: String { "\(low)-\(high)" }
}

/// This process's resident memory, in bytes.
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}
