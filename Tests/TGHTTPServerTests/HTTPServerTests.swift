import Foundation
import HTTPTypes
import TGHTTPServer
import TGTesting
import Testing

@Suite struct HTTPServerTests {
    @Test func answersFromASynchronousHandlerWithStatusHeadersAndBody() async throws {
        let server = try startServer(handler: { _ in
            .response(ServerResponse(status: .created, contentType: "text/plain", body: "made", headerFields: [.cacheControl: "no-store"]))
        })
        let result = try await curl(["-i", server.baseURL + "/things"])
        #expect(result.exitCode == 0)
        #expect(result.stdout.hasPrefix("HTTP/1.1 201"))
        #expect(result.stdout.lowercased().contains("cache-control: no-store"))
        #expect(result.stdout.lowercased().contains("content-length: 4"))
        #expect(result.stdout.hasSuffix("\r\n\r\nmade"))
        await server.shutdown()
    }

    @Test func servesIPv6AndReportsTheIPv6PeerAddress() async throws {
        let server = try startServer(
            { $0.host = "::1" },
            handler: { request in
                .response(ServerResponse(status: .ok, contentType: "text/plain", body: request.remoteAddress ?? "-"))
            }
        )
        let result = try await curl(["-g", "http://[::1]:\(server.port)/"])
        #expect(result.stdout == "::1")
        await server.shutdown()
    }

    @Test func passesTheRawTargetQueryHeadersHostCookiesAndPeerAddressToTheHandler() async throws {
        let server = try startServer(handler: { request in
            let summary = [
                String(request.path),
                request.queryValue("redirect_uri") ?? "-",
                request.queryValue("q") ?? "-",
                request.head.headerFields[HTTPField.Name("X-Thing")!] ?? "-",
                request.cookies.map { "\($0.name)=\($0.value)" }.joined(separator: ","),
                request.remoteAddress ?? "-",
                request.head.method.rawValue,
                request.authority ?? "-",
                request.head.authority ?? "-",
            ].joined(separator: "|")
            return .response(ServerResponse(status: .ok, contentType: "text/plain", body: summary))
        })
        let url = server.baseURL + "/a%2Fb/c?redirect_uri=com.example.app%3A%2Fcb&q=a+b%20c"
        let result = try await curl(["-X", "PATCH", "-H", "X-Thing: yes", "-H", "Host: api.example:8443", "-b", "sid=1; theme=\"dark\"", url])
        #expect(result.stdout == "/a%2Fb/c|com.example.app:/cb|a b c|yes|sid=1,theme=dark|127.0.0.1|PATCH|api.example:8443|api.example:8443")
        await server.shutdown()
    }

    @Test func readsRequestBodiesOfSeveralChunks() async throws {
        let server = try startServer(handler: { request in
            .response(ServerResponse(status: .ok, headerFields: [:], body: .bytes(Array(request.body.reversed()))))
        })
        let payload = String(repeating: "0123456789abcdef", count: 8192)  // 128 KiB, ~8 MHD chunks
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-body-\(UUID().uuidString)")
        try payload.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await curl(["--data-binary", "@\(file.path)", server.baseURL + "/echo"])
        #expect(result.stdout == String(payload.reversed()))
        await server.shutdown()
    }

    /// The request head must fit the connection's memory (`connectionMemoryLimit`, 14 KiB; one
    /// field may take about half of it): a 6 KiB field (a large token or cookie) is served, a
    /// 20 KiB one is refused with 431 and a 20 KiB request line with 414, both before the handler
    /// runs, and the server goes on serving.
    @Test func servesASixKiBFieldAndRefusesAHeadOrALineLargerThanTheConnectionsMemory() async throws {
        let handled = Counter()
        let server = try startServer { request in
            handled.increment()
            return .response(ServerResponse(status: .ok, contentType: "text/plain", body: "\(request.fields.first(.cookie)?.count ?? 0)"))
        }
        func head(_ cookieBytes: Int) -> String {
            "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: \(String(repeating: "c", count: cookieBytes))\r\nConnection: close\r\n\r\n"
        }
        let fits = try RawConnection(port: server.port)
        try await fits.send(head(6 * 1024))
        let served = try await fits.readResponse()
        #expect(served.hasPrefix("HTTP/1.1 200"))
        #expect(served.hasSuffix("\r\n\r\n\(6 * 1024)"))
        let tooLarge = try RawConnection(port: server.port)
        try await tooLarge.send(head(20 * 1024))
        let refusal = try await tooLarge.readResponse()
        #expect(refusal.hasPrefix("HTTP/1.1 431"))
        // libmicrohttpd's own page, without a type: what both API descriptions say of a 431.
        #expect(!refusal.lowercased().contains("\r\ncontent-type:"))
        let longLine = try RawConnection(port: server.port)
        try await longLine.send("GET /?q=\(String(repeating: "q", count: 20 * 1024)) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let lineRefusal = try await longLine.readResponse()
        #expect(lineRefusal.hasPrefix("HTTP/1.1 414"))
        #expect(!lineRefusal.lowercased().contains("\r\ncontent-type:"))
        #expect(handled.value == 1)
        let after = try RawConnection(port: server.port)
        try await after.send(head(10))
        #expect(try await after.readResponse().hasPrefix("HTTP/1.1 200"))
        await server.shutdown()
    }

    /// An answer's head is built in the connection's memory beside the request's head: one that
    /// does not fit (libmicrohttpd would close the connection without a word) goes out as a short
    /// 500 that says so; the same answer with room left is sent whole.
    @Test func anAnswerWhoseHeadDoesNotFitBesideTheRequestsIsA500ThatSaysSo() async throws {
        let server = try startServer { request in
            let size = Int(request.queryValue("size") ?? "") ?? 0
            var fields = HTTPFields()
            fields[HTTPField.Name("X-Big")!] = String(repeating: "b", count: size)
            return .response(ServerResponse(status: .ok, contentType: "text/plain", body: "ok", headerFields: fields))
        }
        let fits = try await curl(["-i", server.baseURL + "/?size=6000"])
        #expect(fits.stdout.hasPrefix("HTTP/1.1 200"))
        #expect(fits.stdout.contains("X-Big: " + String(repeating: "b", count: 6000)))
        let tooLarge = try await curl(["-i", server.baseURL + "/?size=15000"])
        #expect(tooLarge.stdout.hasPrefix("HTTP/1.1 500"), "\(tooLarge.stdout.prefix(200)) \(tooLarge.stderr)")
        #expect(tooLarge.stdout.contains(#""code":"answer_head_too_large""#))
        // A larger request head leaves less room for the same answer.
        let pad = String(repeating: "p", count: 4000)
        let crowded = try await curl(["-i", server.baseURL + "/?size=6000", "-H", "X-Pad-1: " + pad, "-H", "X-Pad-2: " + pad])
        #expect(crowded.stdout.hasPrefix("HTTP/1.1 500"), "\(crowded.stdout.prefix(200))")
        await server.shutdown()
    }

    /// A head that fits the connection's memory but leaves too little room for any answer's
    /// head: the handler does not run (its answer could not be sent) and a short 431 that says
    /// so goes out instead.
    @Test func aHeadThatLeavesNoRoomForAnAnswerIs431BeforeTheHandlerRuns() async throws {
        let handled = Counter()
        let server = try startServer { _ in
            handled.increment()
            return .response(ServerResponse(status: .ok, contentType: "text/plain", body: "ok"))
        }
        let field = String(repeating: "f", count: 6700)
        let crowded = try RawConnection(port: server.port)
        try await crowded.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: \(field)\r\nX-B: \(field)\r\n\r\n")
        let refusal = try await crowded.readResponse()
        #expect(refusal.hasPrefix("HTTP/1.1 431"), "\(refusal.prefix(200))")
        #expect(refusal.contains(#""code":"head_too_large""#))
        #expect(handled.value == 0)
        await server.shutdown()
    }

    @Test func refusesABodyLargerThanTheLimitByContentLengthWithoutReadingIt() async throws {
        let handled = Counter()
        let server = try startServer(
            { $0.maxBodySize = 1000 },
            handler: { _ in
                handled.increment()
                return .response(ServerResponse(status: .ok))
            }
        )
        let result = try await curl(["-i", "--data-binary", String(repeating: "x", count: 5000), server.baseURL + "/"])
        #expect(result.stdout.hasPrefix("HTTP/1.1 413"))
        #expect(result.stdout.contains(#""code":"body_too_large""#))
        #expect(handled.value == 0)
        await server.shutdown()
    }

    @Test func refusesAChunkedBodyThatGrowsPastTheLimit() async throws {
        let server = try startServer({ $0.maxBodySize = 1000 }, handler: { _ in .response(ServerResponse(status: .ok)) })
        let connection = try RawConnection(port: server.port)
        let chunk = String(repeating: "y", count: 600)
        try await connection.send(
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n"
        )
        let response = try await connection.readResponse()
        #expect(response.hasPrefix("HTTP/1.1 413"))
        await server.shutdown()
    }

    @Test func cutsOffAChunkedBodyThatKeepsGoingFarPastTheLimit() async throws {
        let server = try startServer({ $0.maxBodySize = 1000 }, handler: { _ in .response(ServerResponse(status: .ok)) })
        let connection = try RawConnection(port: server.port)
        try await connection.send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        let chunk = "1000\r\n" + String(repeating: "z", count: 4096) + "\r\n"
        for _ in 0..<64 { try? await connection.send(chunk) }  // 256 KiB, never ending
        #expect(try await connection.waitForClose())
        await server.shutdown()
    }

    @Test func answersGarbageWithAnErrorAndKeepsServing() async throws {
        let server = try startServer(handler: { _ in .response(ServerResponse(status: .ok, contentType: "text/plain", body: "fine")) })
        let connection = try RawConnection(port: server.port)
        try await connection.send("\u{1}\u{2}GARBAGE \r\n\r\n")
        let response = try await connection.readResponse()
        #expect(response.hasPrefix("HTTP/1.1 400") || response.isEmpty)
        let result = try await curl([server.baseURL + "/"])
        #expect(result.stdout == "fine")
        await server.shutdown()
    }

    @Test func keepsConnectionsAliveAcrossRequests() async throws {
        let server = try startServer(handler: { request in
            .async { request in ServerResponse(status: .ok, contentType: "text/plain", body: String(request.path)) }
        })
        let connection = try RawConnection(port: server.port)
        for path in ["/one", "/two", "/three"] {
            try await connection.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try await connection.readResponse()
            #expect(response.hasPrefix("HTTP/1.1 200"))
            #expect(response.hasSuffix(path))
            #expect(!response.lowercased().contains("connection: close"))
        }
        await server.shutdown()
    }

    @Test func closesIdleConnectionsAfterTheConnectionTimeout() async throws {
        let server = try startServer({ $0.connectionTimeoutSeconds = 1 }, handler: { _ in .response(ServerResponse(status: .ok)) })
        let connection = try RawConnection(port: server.port)
        try await connection.send("GET / HTTP/1.1\r\nHo")  // a slow client that stops mid-head
        let started = ContinuousClock.now
        #expect(try await connection.waitForClose())
        #expect(ContinuousClock.now - started < .seconds(4))
        await server.shutdown()
    }
}

/// A thread-safe counter for handlers.
final class Counter: @unchecked Sendable {
    // Invariant: `count` is only accessed with `lock` held.
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
