import Foundation
import HTTPTypes
import Synchronization
import TGEventLoop
import TGHTTPServer
import TGTesting
import Testing

@testable import TGHTTPClient

/// Bodies streamed both ways through a ``LoopExchange``, with back-pressure.
@Suite struct LoopExchangeStreamingTests {
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
        let response = try await ExchangeReader.start(client, get(server.port, "/big"), idleTimeout: .seconds(60))
        #expect(response.head.status == .ok)
        #expect(response.head.headerFields[.contentLength] == nil)
        var total = 0
        var reads = 0
        while let piece = try await response.next() {
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
        let response = try await ExchangeReader.start(
            client,
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
        let response = try await ExchangeReader.start(
            client,
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

    /// How an exchange ends while its request body's producer is still writing.
    enum Ending: String, CaseIterable, Sendable {
        /// The reader went away (``LoopExchange/cancel()``).
        case cancelled
        /// The client shut down.
        case shutDown
    }

    /// A request body's producer still writing when its exchange ends is told so: its write
    /// throws ``HTTPClientError/cancelled`` instead of waiting for ever for reads that will not
    /// come (holding what it reads from: on the proxy, an app's request body).
    @Test(arguments: Ending.allCases)
    func aProducerStillWritingWhenItsExchangeEndsIsToldSo(ending: Ending) async throws {
        let scripted = try ScriptedHTTPServer { _ in .hang }  // reads the chunked body as it comes
        let client = testClient()
        let producer = Producer()
        let piece = [UInt8](repeating: 0x70, count: 64 * 1024)
        let request = LoopRequest(method: "POST", scheme: "http", authority: "127.0.0.1:\(scripted.port)", path: "/up", headers: HeaderLines())
        let body = HTTPClientRequestBody.stream(length: nil) { writer in
            do {
                while true {
                    try await writer.write(piece)
                    producer.written.add(1, ordering: .relaxed)
                }
            } catch {
                producer.ended(error)
                throw error
            }
        }
        let started = await client.loop.run { try? client.startOnLoop(request, body: body, headTimeout: .seconds(30), idleTimeout: .seconds(30)) }
        let exchange = try #require(started)
        // The body moves (the server reads it) before the exchange ends.
        let moving = ContinuousClock.now.advanced(by: .seconds(5))
        while producer.written.load(ordering: .relaxed) < 8, ContinuousClock.now < moving { try await Task.sleep(for: .milliseconds(10)) }
        #expect(producer.written.load(ordering: .relaxed) >= 8)
        switch ending {
        case .cancelled: await client.loop.run { exchange.cancel() }
        case .shutDown: client.shutdown()
        }
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        while producer.error == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(producer.error == .cancelled)
        client.shutdown()
        scripted.stop()
    }

    /// What a test's request body producer did.
    final class Producer: Sendable {
        let written = Atomic<Int>(0)
        private let failure = Mutex<HTTPClientError?>(nil)

        func ended(_ error: any Error) {
            failure.withLock { $0 = $0 ?? (error as? HTTPClientError ?? HTTPClientError(.transport, detail: "\(error)")) }
        }

        var error: HTTPClientError? { failure.withLock { $0 } }
    }

    /// The reader going away (``LoopExchange/cancel()``, as a relayed body's `close` does) ends
    /// the transfer: the server's endless answer stops.
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
            let response = try await ExchangeReader.start(client, get(server.port, "/endless"), idleTimeout: .seconds(60))
            _ = try await response.next()
            await response.cancel()
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
        let response = try await ExchangeReader.start(client, get(server.port, "/small"), idleTimeout: .seconds(10), wholeBodyUpTo: 64)
        #expect(response.completeAtHead)
        #expect(try await response.collect(upTo: 64) == Array("helloworld".utf8))
        client.shutdown()
        await server.shutdown()
    }

    /// The same rule where libcurl hands the head over, without a network's timing: a head
    /// announcing at most the limit is held at its blank line, a larger one is delivered there.
    @Test func theHeadIsHeldAtItsEndOnlyWhenTheAnnouncedBodyIsSmall() async throws {
        let client = testClient()  // libcurl initialised
        for (limit, held) in [(64, true), (10, true), (9, false), (0, false)] {
            let seen: (held: Bool, delivered: Bool, headToExchange: Bool)? = await client.loop.run {
                guard let exchange = try? LoopExchange(client: client, idleTimeout: .seconds(10), handles: EasyHandlePool(capacity: 1)) else {
                    return nil
                }
                var headToExchange = false
                exchange.onHead = { headToExchange = (try? $0.get()) != nil }
                let transfer = exchange
                transfer.holdHeadUpTo = limit
                for line in ["HTTP/1.1 200 OK\r\n", "content-LENGTH:  10 \r\n", "\r\n"] {
                    Array(line.utf8).withUnsafeBufferPointer { transfer.receiveHeader($0) }
                }
                exchange.cancel()
                return (transfer.headHeld, transfer.headDelivered, headToExchange)
            }
            let result = try #require(seen, "limit \(limit)")
            #expect(result.held == held, "limit \(limit)")
            #expect(result.delivered == !held, "limit \(limit)")
            #expect(result.headToExchange == !held, "limit \(limit)")
        }
        client.shutdown()
    }

    @Test func aBodyAboveTheLimitStillStreamsAfterTheHead() async throws {
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let server = try gatedServer(gate)
        let client = testClient()
        let response = try await ExchangeReader.start(client, get(server.port, "/small"), idleTimeout: .seconds(10), wholeBodyUpTo: 9)
        // The server holds the second half until the head was seen here.
        #expect(!response.completeAtHead)
        #expect(!(await response.isComplete))
        open.yield()
        #expect(try await response.collect(upTo: 64) == Array("helloworld".utf8))
        client.shutdown()
        await server.shutdown()
    }
}
