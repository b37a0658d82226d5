import Foundation
import TGPostgres
import TGTesting
import Testing

@Suite struct ServerRestartTests {
    @Test func theSamePoolWorksAgainAfterThePostgreSQLServerRestarts() async throws {
        _ = try TestDatabase.adminURL()  // runs under `make test` only, like every database test
        try await PrivateCluster.with { cluster, url in try await restart(cluster, url) }
    }

    func restart(_ cluster: PrivateCluster, _ url: String) async throws {
        var configuration = PostgresClient.Configuration(url: url)
        configuration.maxConnections = 4
        configuration.connectTimeout = .seconds(2)
        configuration.acquireTimeout = .seconds(2)
        let client = PostgresClient(configuration: configuration)
        defer { client.shutdown() }
        try await client.query("CREATE TABLE IF NOT EXISTS kept (n int)")
        try await client.query("INSERT INTO kept VALUES (1)")

        try await cluster.run("stop")
        let whileDown = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        #expect(whileDown?.isUnavailable == true)

        try await cluster.run("start")
        let rows = try await client.query("SELECT count(*) AS n FROM kept")
        #expect(try rows.first?.decode(Int.self, "n") == 1)
    }
}
