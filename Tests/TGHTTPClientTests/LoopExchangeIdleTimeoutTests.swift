import HTTPTypes
import TGHTTPServer
import TGTesting
import Testing

@testable import TGHTTPClient

/// A ``LoopExchange``'s deadline after its head, and an exchange's with a streamed upload from
/// its start, is an idle timeout, never one for the whole exchange: a long download or upload that
/// keeps moving is not cut, however long it takes; one that goes quiet is.
@Suite struct LoopExchangeIdleTimeoutTests {
    static func server(threads: Int = 1, _ handler: @escaping HTTPServer.Handler) throws -> HTTPServer {
        var configuration = HTTPServer.Configuration()
        configuration.threads = threads
        configuration.maxBodySize = 8 << 20
        configuration.limits = { _, path in
            path.hasPrefix("/up") ? HTTPServer.RequestLimits(maxBodySize: 8 << 20, requestTimeout: .seconds(30), streamsBody: true) : nil
        }
        let server = HTTPServer(configuration: configuration, handler: handler)
        try server.start()
        return server
    }

    @Test func aDownloadThatKeepsMovingOutlastsItsIdleTimeout() async throws {
        let server = try Self.server { _ in
            .response(
                ServerResponse(
                    status: .ok,
                    body: .stream { writer in
                        for _ in 0..<20 {
                            try await writer.write([UInt8](repeating: 0x61, count: 1000))
                            try await Task.sleep(for: .milliseconds(50))
                        }
                    }
                )
            )
        }
        let client = testClient()
        let clock = ContinuousClock()
        let started = clock.now
        let response = try await ExchangeReader.start(
            client,
            get(server.port, "/trickle"),
            headTimeout: .milliseconds(300),
            idleTimeout: .milliseconds(300)
        )
        let body = try await response.collect(upTo: 1 << 20)
        #expect(body.count == 20_000)
        // Three times the idle timeout and more: only a whole-exchange deadline would have cut it.
        #expect(clock.now - started > .milliseconds(900))
        client.shutdown()
        await server.shutdown()
    }

    @Test func aReaderThatPausesLongerThanTheIdleTimeoutGetsTheWholeBody() async throws {
        let chunk = [UInt8](repeating: 0x42, count: 64 * 1024)
        let server = try Self.server { _ in
            .response(ServerResponse(status: .ok, body: .stream { writer in for _ in 0..<32 { try await writer.write(chunk) } }))
        }
        let client = testClient()
        let response = try await ExchangeReader.start(client, get(server.port, "/big"), idleTimeout: .milliseconds(300))
        // Paused for its reader, the transfer is not idle (four stalls, each longer than the
        // idle timeout).
        let (total, stalls) = try await response.readStalling(4, for: .milliseconds(400))
        #expect(stalls == 4)
        #expect(total == 2 << 20)
        client.shutdown()
        await server.shutdown()
    }

    @Test func anUploadThatKeepsMovingOutlastsItsIdleTimeout() async throws {
        let server = try Self.server(threads: 2) { _ in
            .async { request in
                var count = 0
                do {
                    for try await chunk in request.bodyStream! { count += chunk.count }
                } catch {
                    return ServerResponse(status: .badRequest)
                }
                return ServerResponse(status: .ok, contentType: "text/plain", body: "\(count)")
            }
        }
        let client = testClient()
        let clock = ContinuousClock()
        let started = clock.now
        let response = try await ExchangeReader.start(
            client,
            get(server.port, "/upload", method: .post),
            body: .stream(length: nil) { writer in
                for _ in 0..<12 {
                    try await writer.write([UInt8](repeating: 0x62, count: 100_000))
                    // The producer is the slow one: the transfer waits for it, it is not idle.
                    try await Task.sleep(for: .milliseconds(100))
                }
            },
            idleTimeout: .milliseconds(300)
        )
        #expect(response.head.status == .ok)
        #expect(try await response.collect(upTo: 100) == Array("1200000".utf8))
        #expect(clock.now - started > .milliseconds(900))
        client.shutdown()
        await server.shutdown()
    }

    @Test func aBodyThatGoesQuietIsCutAtTheIdleTimeout() async throws {
        let gate = TestGate()
        let server = try Self.server { _ in answerThatGoesQuiet(until: gate) }
        let client = testClient()
        let clock = ContinuousClock()
        let started = clock.now
        let response = try await ExchangeReader.start(client, get(server.port, "/quiet"), idleTimeout: .milliseconds(300))
        await #expect(throws: HTTPClientError.timeout) {
            while try await response.next() != nil {}
        }
        #expect(clock.now - started < .seconds(2))
        gate.open()
        client.shutdown()
        await server.shutdown()
    }

    @Test func anAnswerThatDoesNotFollowTheUploadInTimeIsATimeout() async throws {
        let gate = TestGate()
        let server = try Self.server(threads: 2) { _ in
            .async { request in
                do {
                    for try await _ in request.bodyStream! {}
                } catch {
                    return ServerResponse(status: .badRequest)
                }
                await gate.wait()
                return ServerResponse(status: .ok)
            }
        }
        let client = testClient()
        let clock = ContinuousClock()
        let started = clock.now
        await #expect(throws: HTTPClientError.timeout) {
            _ = try await ExchangeReader.start(
                client,
                get(server.port, "/upload", method: .put),
                body: .stream(length: 200_000) { writer in try await writer.write([UInt8](repeating: 0x63, count: 200_000)) },
                idleTimeout: .milliseconds(300)
            )
        }
        #expect(clock.now - started < .seconds(2))
        gate.open()
        client.shutdown()
        await server.shutdown()
    }
}
