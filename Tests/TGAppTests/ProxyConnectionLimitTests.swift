import Foundation
import TGTesting
import Testing

@testable import TGProxy

/// `upstreams[].max_connections` is the number of connections one instance opens to an API at
/// once, over all its event loops (docs/operations.md): one client per loop, each with its share.
@Suite struct ProxyConnectionLimitTests {
    @Test func theLoopsSharesOfAnAPIsConnectionsAddUpToItsLimit() {
        #expect(ProxyUpstream.connectionShares(1024, loops: 2) == [512, 512])
        #expect(ProxyUpstream.connectionShares(3, loops: 2) == [2, 1])
        #expect(ProxyUpstream.connectionShares(10, loops: 4) == [3, 3, 2, 2])
        // Fewer connections than loops: one each (a loop without any could not call the API).
        #expect(ProxyUpstream.connectionShares(1, loops: 2) == [1, 1])
        for limit in 2...40 {
            for loops in 1...8 where loops <= limit {
                #expect(ProxyUpstream.connectionShares(limit, loops: loops).reduce(0, +) == limit)
            }
        }
    }

    @Test func anInstanceNeverHoldsMoreCallsToAnAPIAtOnceThanItsMaxConnections() async throws {
        try await AuthFlowHarness.run(
            serverOptions: ", threads: 2",
            withGraphAPI: true,
            upstreamOptions: #", path_prefixes: ["/slow"], max_connections: 3"#,
            transport: .sockets
        ) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            // Warm: the session and the token in memory, so the calls below all go at once.
            #expect(try await curl(["-i", harness.baseURL + "/api/graph/slow?ms=1", "-H", "Authorization: Bearer \(token)"]).status == 200)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        try await curl(["-i", harness.baseURL + "/api/graph/slow?ms=300", "-H", "Authorization: Bearer \(token)"]).status ?? 0
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 12))
            // Twelve calls wanted a connection at once; three were open, the others waited.
            let peak = harness.graph?.peakConcurrentSlowCalls ?? 0
            #expect(peak <= 3)
            #expect(peak >= 2)
        }
    }
}
