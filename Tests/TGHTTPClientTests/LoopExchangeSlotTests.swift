import HTTPTypes
import Synchronization
import TGEventLoop
import TGHTTPServer
import Testing

@testable import TGHTTPClient

/// Calls beyond a client's connection limit wait for a connection and start as soon as one is
/// free, not at libcurl's next timeout (docs/c-libraries.md): the client acts on the timeout
/// again after a transfer ends, when one can have waited.
@Suite struct LoopExchangeSlotTests {
    /// What the calls gave. Invariant: used only on the client's loop, where the calls start and
    /// their heads arrive.
    final class Heads: @unchecked Sendable {
        var statuses: [Int] = []
        var exchanges: [LoopExchange] = []
    }

    @Test(arguments: [1, 4])
    func callsBeyondTheConnectionLimitStartAsSoonAsAConnectionIsFree(limit: Int) async throws {
        let upstream = try LoopExchangeTests.upstream { _ in .response(ServerResponse(status: .ok)) }
        var configuration = HTTPClient.Configuration()
        configuration.allowPlainHTTPToLoopbackForTesting = true
        configuration.maxConnections = limit
        configuration.maxConnectionsPerHost = limit
        let client = HTTPClient(configuration: configuration)
        let calls = 6
        let clock = ContinuousClock()
        let started = clock.now
        let statuses: [Int] = try await withCheckedThrowingContinuation { continuation in
            _ = client.loop.execute {
                // All at once on the loop: with one connection, five wait for it in turn.
                let heads = Heads()
                for _ in 0..<calls {
                    let request = LoopRequest(
                        method: "GET",
                        scheme: "http",
                        authority: "127.0.0.1:\(upstream.port)",
                        path: "/",
                        headers: HeaderLines()
                    )
                    do {
                        let exchange = try client.startOnLoop(request, headTimeout: .seconds(30), idleTimeout: .seconds(30))
                        heads.exchanges.append(exchange)
                        exchange.onHead = { result in
                            heads.statuses.append((try? result.get().status) ?? 0)
                            if heads.statuses.count == calls {
                                heads.exchanges.removeAll()
                                continuation.resume(returning: heads.statuses)
                            }
                        }
                    } catch {
                        continuation.resume(throwing: error)
                        return
                    }
                }
            }
        }
        #expect(statuses == Array(repeating: 200, count: calls))
        // Each call takes a millisecond or so on loopback; a held-back one that waited for
        // libcurl's next timeout would take a second or more.
        #expect(clock.now - started < .milliseconds(900))
        client.shutdown()
        await upstream.shutdown()
    }
}
