import Foundation
import HTTPTypes
import TGHTTPServer
import Testing

@testable import TGHTTPClient

@Suite struct StreamingTests {
    @Test func streamsA64MiBBodyOfUnknownLengthToASlowConsumer() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.threads = 2
        let chunk = [UInt8](repeating: 0x5A, count: 64 * 1024)
        let server = HTTPServer(configuration: configuration) { _ in
            .response(
                ServerResponse(
                    status: .ok,
                    body: .stream { writer in
                        for _ in 0..<1024 { try await writer.write(chunk) }
                    }
                )
            )
        }
        try server.start()
        let client = testClient()
        let response = try await client.stream(get(server.port, "/big"), idleTimeout: .seconds(60), bufferSize: 256 * 1024)
        #expect(response.head.status == .ok)
        #expect(response.head.headerFields[.contentLength] == nil)
        var total = 0
        var reads = 0
        for try await piece in response {
            total += piece.count
            reads += 1
            if reads % 256 == 0 { try await Task.sleep(for: .milliseconds(20)) }  // a slow reader
        }
        #expect(total == 64 << 20)
        client.shutdown()
        await server.shutdown()
    }

    @Test func uploadsABodyOfUnknownLengthChunked() async throws {
        let server = try echoServer()
        let client = testClient()
        let piece = [UInt8](repeating: 0x41, count: 10_000)
        let response = try await client.stream(
            get(server.port, "/upload", method: .post),
            body: .stream(length: nil) { writer in
                for _ in 0..<300 { try await writer.write(piece) }
            },
            idleTimeout: .seconds(30)
        )
        let body = try await response.collect(upTo: 8 << 20)
        #expect(body.count == 3_000_000)
        #expect(body.allSatisfy { $0 == 0x41 })
        client.shutdown()
        await server.shutdown()
    }

    @Test func uploadsAStreamOfKnownLength() async throws {
        let server = try echoServer()
        let client = testClient()
        let response = try await client.stream(
            get(server.port, "/upload", method: .put),
            body: .stream(length: 6) { writer in
                try await writer.write(Array("abc".utf8))
                try await writer.write(Array("def".utf8))
            },
            idleTimeout: .seconds(10)
        )
        #expect(response.head.headerFields[HTTPField.Name("X-Method")!] == "PUT")
        #expect(try await response.collect(upTo: 100) == Array("abcdef".utf8))
        client.shutdown()
        await server.shutdown()
    }

    @Test func droppingAStreamedResponseEndsItsTransfer() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.threads = 2
        let server = HTTPServer(configuration: configuration) { _ in
            .response(
                ServerResponse(
                    status: .ok,
                    body: .stream { writer in
                        while true { try await writer.write([UInt8](repeating: 1, count: 65536)) }
                    }
                )
            )
        }
        try server.start()
        let client = testClient()
        do {
            let response = try await client.stream(get(server.port, "/endless"), idleTimeout: .seconds(60))
            var iterator = response.makeAsyncIterator()
            _ = try await iterator.next()
        }
        // The endless producer stops once the client's transfer is gone.
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        while server.requestsInFlight > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(server.requestsInFlight == 0)
        client.shutdown()
        await server.shutdown()
    }
}

@Suite struct WholeSmallBodyTests {
    /// A server whose answer announces 10 bytes, sends 5, and sends the rest once `gate` opens.
    func gatedServer(_ gate: AsyncStream<Void>) throws -> HTTPServer {
        var configuration = HTTPServer.Configuration()
        configuration.threads = 1
        let server = HTTPServer(configuration: configuration) { _ in
            .response(
                ServerResponse(
                    status: .ok,
                    headerFields: [.contentLength: "10"],
                    body: .stream { writer in
                        try await writer.write(Array("hello".utf8))
                        for await _ in gate { break }
                        try await writer.write(Array("world".utf8))
                    }
                )
            )
        }
        try server.start()
        return server
    }

    @Test func anAnnouncedSmallBodyIsCompleteWhenTheHeadIsReturned() async throws {
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        open.yield()
        let server = try gatedServer(gate)
        let client = testClient()
        let response = try await client.stream(get(server.port, "/small"), idleTimeout: .seconds(10), wholeBodyUpTo: 64)
        #expect(response.channel.isFinished)
        #expect(try await response.collect(upTo: 64) == Array("helloworld".utf8))
        client.shutdown()
        await server.shutdown()
    }

    /// The same rule where libcurl hands the head over, without a network's timing: a head
    /// announcing at most the limit is held at its blank line, a larger one is delivered there.
    @Test func theHeadIsHeldAtItsEndOnlyWhenTheAnnouncedBodyIsSmall() throws {
        let client = testClient()  // libcurl initialised
        defer { client.shutdown() }
        for (limit, held) in [(64, true), (10, true), (9, false), (0, false)] {
            let transfer = try Transfer(mode: .streaming(BodyChannel(highWater: 1024)), handles: EasyHandlePool(capacity: 1))
            transfer.holdHeadUpTo = limit
            for line in ["HTTP/1.1 200 OK\r\n", "content-LENGTH:  10 \r\n", "\r\n"] {
                Array(line.utf8).withUnsafeBufferPointer { transfer.receiveHeader($0) }
            }
            #expect(transfer.headHeld == held, "limit \(limit)")
            #expect(transfer.headDelivered == !held, "limit \(limit)")
        }
    }

    @Test func aBodyAboveTheLimitStillStreamsAfterTheHead() async throws {
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let server = try gatedServer(gate)
        let client = testClient()
        let response = try await client.stream(get(server.port, "/small"), idleTimeout: .seconds(10), wholeBodyUpTo: 9)
        // The server holds the second half until the head was seen here.
        #expect(!response.channel.isFinished)
        open.yield()
        #expect(try await response.collect(upTo: 64) == Array("helloworld".utf8))
        client.shutdown()
        await server.shutdown()
    }
}
