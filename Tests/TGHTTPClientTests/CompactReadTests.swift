import HTTPTypes
import TGEventLoop
import TGHTTPServer
import Testing

@testable import TGHTTPClient

/// Calls started on the loop while many are in flight read their answers into compact buffers
/// (`HTTPClient.Configuration.compactReadsAbove`, `EasyHandlePool`): less memory per call under
/// a burst, and the answers still whole.
@Suite struct CompactReadTests {
    /// What one call gave: whether it read compact, the most bytes libcurl handed over at once,
    /// and the body.
    struct Call {
        var compact: Bool
        var largestPiece = 0
        var body: [UInt8] = []
    }

    /// Starts `count` calls to `port` in one turn of the client's loop and reads each answer
    /// whole, on the loop.
    final class Burst: @unchecked Sendable {
        // Invariant: every member is used only on the client's loop thread, after `init`.
        let client: HTTPClient
        var calls: [Call] = []
        var exchanges: [LoopExchange?] = []
        var open = 0
        var continuation: CheckedContinuation<[Call], any Error>?

        init(client: HTTPClient) { self.client = client }

        func run(count: Int, port: UInt16) async throws -> [Call] {
            try await withCheckedThrowingContinuation { continuation in
                _ = client.loop.execute {
                    self.continuation = continuation
                    self.open = count
                    do {
                        for index in 0..<count { try self.start(index, port: port) }
                    } catch {
                        self.finish(.failure(error))
                    }
                }
            }
        }

        private func start(_ index: Int, port: UInt16) throws {
            let request = LoopRequest(method: "GET", scheme: "http", authority: "127.0.0.1:\(port)", path: "/", headers: HeaderLines())
            let exchange = try client.startOnLoop(request, headTimeout: .seconds(10), idleTimeout: .seconds(10))
            calls.append(Call(compact: exchange.readsCompact))
            exchanges.append(exchange)
            exchange.onHead = { result in
                switch result {
                case .success: self.drain(index)
                case .failure(let error): self.finish(.failure(error))
                }
            }
        }

        private func drain(_ index: Int) {
            guard let exchange = exchanges[index] else { return }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                switch buffer.withUnsafeMutableBytes({ exchange.read(into: $0) }) {
                case .bytes(let count):
                    calls[index].body += buffer[..<count]
                case .wait:
                    exchange.notify { self.drain(index) }
                    return
                case .end:
                    calls[index].largestPiece = Int(exchange.largestPiece)
                    exchanges[index] = nil
                    open -= 1
                    if open == 0 { finish(.success(calls)) }
                    return
                case .failed(let error):
                    finish(.failure(error))
                    return
                }
            }
        }

        private func finish(_ result: Result<[Call], any Error>) {
            let pending = continuation
            continuation = nil
            exchanges = []
            pending?.resume(with: result)
        }
    }

    @Test func callsPastTheThresholdReadCompactAndTheirAnswersArriveWhole() async throws {
        let body = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        let upstream = try LoopExchangeTests.upstream { _ in
            .response(ServerResponse(status: .ok, body: .bytes(body)))
        }
        let client = testClient { $0.compactReadsAbove = 2 }

        // Four at once: the first two start below the threshold, the next two past it.
        let burst = try await Burst(client: client).run(count: 4, port: upstream.port)
        #expect(burst.map { $0.compact } == [false, false, true, true])
        for call in burst {
            #expect(call.body == body)
            if call.compact {
                #expect(call.largestPiece <= EasyHandlePool.compactReadBufferSize)
            } else {
                // libcurl's own buffer hands over more than a compact one can hold.
                #expect(call.largestPiece > EasyHandlePool.compactReadBufferSize)
            }
        }

        // The burst is over: a call alone takes a handle with libcurl's buffer again, though
        // compact ones are spare.
        let alone = try await Burst(client: client).run(count: 1, port: upstream.port)
        #expect(alone.map { $0.compact } == [false])
        #expect(alone.first?.body == body)
        #expect((alone.first?.largestPiece ?? 0) > EasyHandlePool.compactReadBufferSize)

        client.shutdown()
        await upstream.shutdown()
    }

    @Test func aCompactCallThatCannotConnectSaysWhyWithoutAnErrorBuffer() async throws {
        // Every call compact; port 1 on loopback refuses.
        let client = testClient { $0.compactReadsAbove = 0 }
        let failure: HTTPClientError? = try await withCheckedThrowingContinuation { continuation in
            _ = client.loop.execute {
                do {
                    let request = LoopRequest(method: "GET", scheme: "http", authority: "127.0.0.1:1", path: "/", headers: HeaderLines())
                    let exchange = try client.startOnLoop(request, headTimeout: .seconds(5), idleTimeout: .seconds(5))
                    #expect(exchange.readsCompact)
                    #expect(exchange.errorBuffer == nil)
                    exchange.onHead = { result in
                        if case .failure(let error) = result { continuation.resume(returning: error) } else { continuation.resume(returning: nil) }
                    }
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
        #expect(failure == .connectFailed)
        // libcurl's text for the code and the system's for the refused connect.
        #expect(failure?.detail == "Couldn't connect to server: Connection refused")
        client.shutdown()
    }
}
