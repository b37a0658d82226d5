import Foundation
import TGPostgres
import TGTesting
import Testing

/// Two plain clusters behind one multi-host URL with `target_session_attrs=read-write`, as a
/// client sees a primary and its replica: a server that stops taking writes (what a demoted
/// primary answers) or stops altogether (a dead primary) is left for the other one, without a
/// restart of the client. scripts/patroni.sh and bench/failover.sh do the same with a real
/// Patroni failover.
@Suite struct FailoverTests {
    @Test func aPoolLeavesAServerThatStopsTakingWritesAndFindsTheWritableOne() async throws {
        _ = try TestDatabase.adminURL()  // runs under `make test` only, like every database test
        try await withTwoClusters { first, second, url in
            let client = PostgresClient(configuration: Self.configuration(url))
            defer { client.shutdown() }
            #expect(try await Self.serverPort(client) == first.port)
            try await client.query("INSERT INTO kept VALUES (1)")

            try await Self.setReadOnly(first, true)
            let refused = await #expect(throws: PostgresError.self) { try await client.query("INSERT INTO kept VALUES (2)") }
            #expect(refused?.sqlState == .readOnlySQLTransaction)
            // An unavailable database (503, retry), not a refused statement (500).
            #expect(refused?.isUnavailable == true)
            // The connection was dropped; the next one skips the read-only server.
            try await client.query("INSERT INTO kept VALUES (3)")
            #expect(try await Self.serverPort(client) == second.port)
            #expect(client.openConnections == 1)
        }
    }

    @Test func aListenerLeavesAServerThatStopsTakingWritesAndListensOnTheWritableOne() async throws {
        _ = try TestDatabase.adminURL()
        try await withTwoClusters { first, second, url in
            let listener = try PostgresListener(url: url, channels: ["tokengate_invalidate"])
            defer { listener.stop() }
            var events = listener.events.makeAsyncIterator()
            let onFirst = PostgresClient(configuration: Self.configuration(Self.singleHostURL(first)))
            let onSecond = PostgresClient(configuration: Self.configuration(Self.singleHostURL(second)))
            defer {
                onFirst.shutdown()
                onSecond.shutdown()
            }
            let toFirst = Self.notifyEvery50ms(onFirst, "first")
            defer { toFirst.cancel() }
            #expect(await events.next() == .notification(channel: "tokengate_invalidate", payload: "first"))
            toFirst.cancel()

            try await Self.setReadOnly(first, true)
            let toSecond = Self.notifyEvery50ms(onSecond, "second")
            defer { toSecond.cancel() }
            let started = ContinuousClock.now
            #expect(await Self.reconnects(listener, &events, thenDelivers: "second"))
            // The listener asks every 2 s whether its server still takes writes.
            #expect(ContinuousClock.now - started < .seconds(6))
        }
    }

    @Test func aPoolAndAListenerFollowThePrimaryWhenItsServerStops() async throws {
        _ = try TestDatabase.adminURL()
        try await withTwoClusters { first, second, url in
            let client = PostgresClient(configuration: Self.configuration(url))
            defer { client.shutdown() }
            let listener = try PostgresListener(url: url, channels: ["tokengate_invalidate"])
            defer { listener.stop() }
            var events = listener.events.makeAsyncIterator()
            #expect(try await Self.serverPort(client) == first.port)
            let toFirst = Self.notifyEvery50ms(client, "first")
            #expect(await events.next() == .notification(channel: "tokengate_invalidate", payload: "first"))
            toFirst.cancel()
            _ = await toFirst.result

            try await first.run("stop")
            // The idle connection was closed by the server: the pool sees it and opens one to the other host.
            try await client.query("INSERT INTO kept VALUES (1)")
            #expect(try await Self.serverPort(client) == second.port)
            let toSecond = Self.notifyEvery50ms(client, "second")
            defer { toSecond.cancel() }
            #expect(await Self.reconnects(listener, &events, thenDelivers: "second"))
        }
    }

    /// What a failover does to a session-level advisory lock: it dies with its server, the
    /// holder is not told while it works, and anyone on the new primary can take the same key
    /// meanwhile. Whoever relies on such a lock must fence its writes (TGStore's grant refresh
    /// claims: docs/scaling.md, "PostgreSQL failover").
    @Test func anAdvisoryLockDiesWithItsServerWhileItsHolderStillWorks() async throws {
        _ = try TestDatabase.adminURL()
        try await withTwoClusters { first, second, url in
            let holderLocks = PostgresAdvisoryLocks(configuration: Self.configuration(url))
            let otherLocks = PostgresAdvisoryLocks(configuration: Self.configuration(url))
            let key: Int64 = 42
            let (inBody, bodyEntered) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseBody) = AsyncStream.makeStream(of: Void.self)
            let holder = Task {
                try await holderLocks.withLock(key, deadline: .now + .seconds(5), whileWaiting: { nil }) {
                    bodyEntered.yield()
                    for await _ in release { break }
                    return "held to the end"
                }
            }
            var entered = inBody.makeAsyncIterator()
            await entered.next()
            #expect(try await otherLocks.tryLock(key) == false)

            try await first.run("stop")
            // The holder is still in its body; on the new primary the key is free.
            var takenElsewhere = false
            for _ in 0..<50 where !takenElsewhere {
                takenElsewhere = (try? await otherLocks.tryLock(key)) == true
                if !takenElsewhere { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(takenElsewhere)
            releaseBody.yield()
            // Giving back a lock whose connection died is not an error for the holder.
            #expect(try await holder.value == "held to the end")
            await otherLocks.unlock(key)
            _ = second
        }
    }

    /// Nothing reads the advisory locks' connection between statements, so it learns that its
    /// server went (a failover) only at its next statement: that take must not fail the caller.
    @Test func theFirstLockTakenAfterItsConnectionDiedIsTakenOnANewOne() async throws {
        try await TestDatabase.withFreshDatabase { client, url in
            let locks = PostgresAdvisoryLocks(configuration: Self.configuration(url))
            #expect(try await locks.tryLock(7))
            await locks.unlock(7)
            let ended = try await client.query(
                """
                SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%advisory%'
                """
            )
            #expect(try ended.first?.decode(Int.self, "n") == 1)
            try await Task.sleep(for: .milliseconds(100))
            #expect(try await locks.tryLock(7))
            await locks.unlock(7)
        }
    }

    // MARK: - Helpers

    static func configuration(_ url: String) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(url: url)
        configuration.maxConnections = 2
        configuration.connectTimeout = .seconds(2)
        configuration.acquireTimeout = .seconds(2)
        return configuration
    }

    static func singleHostURL(_ cluster: PrivateCluster) -> String {
        "postgresql://tokengate@127.0.0.1:\(cluster.port)/tokengate?sslmode=disable"
    }

    static func serverPort(_ client: PostgresClient) async throws -> Int? {
        try await client.query("SELECT inet_server_port() AS port").first?.decode(Int.self, "port")
    }

    /// Turns `default_transaction_read_only` on or off for the whole server, as a reload does it,
    /// and waits until a new session sees it.
    static func setReadOnly(_ cluster: PrivateCluster, _ readOnly: Bool) async throws {
        let admin = PostgresClient(configuration: configuration(singleHostURL(cluster)))
        defer { admin.shutdown() }
        try await admin.query(PostgresQuery(unsafeSQL: "ALTER SYSTEM SET default_transaction_read_only = \(readOnly ? "on" : "off")"))
        try await admin.query("SELECT pg_reload_conf()")
        for _ in 0..<50 {
            let fresh = PostgresClient(configuration: configuration(singleHostURL(cluster)))
            defer { fresh.shutdown() }
            let value = try await fresh.query("SHOW default_transaction_read_only").first?.decode(String.self, "default_transaction_read_only")
            if value == (readOnly ? "on" : "off") { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("the server did not turn read-only")
    }

    /// Whether `listener` reconnects and then delivers `payload`, within 10 s (then the stream,
    /// which would otherwise wait for ever, is ended).
    static func reconnects(
        _ listener: PostgresListener,
        _ events: inout AsyncStream<PostgresListenerEvent>.Iterator,
        thenDelivers payload: String
    ) async -> Bool {
        let watchdog = Task {
            try await Task.sleep(for: .seconds(10))
            listener.stop()
        }
        defer { watchdog.cancel() }
        var reconnected = false
        while let event = await events.next() {
            if event == .reconnected { reconnected = true }
            if reconnected, event == .notification(channel: "tokengate_invalidate", payload: payload) { return true }
        }
        return false
    }

    static func notifyEvery50ms(_ client: PostgresClient, _ payload: String) -> Task<Void, any Error> {
        Task {
            while !Task.isCancelled {
                try? await client.notify(channel: "tokengate_invalidate", payload: payload)
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Two private clusters, each with a table `kept`, and the multi-host URL of both, the first
    /// one first.
    func withTwoClusters(_ body: (PrivateCluster, PrivateCluster, String) async throws -> Void) async throws {
        try await PrivateCluster.with { first, _ in
            try await PrivateCluster.with { second, _ in
                for cluster in [first, second] {
                    let setup = PostgresClient(configuration: Self.configuration(Self.singleHostURL(cluster)))
                    defer { setup.shutdown() }
                    try await setup.query("CREATE TABLE IF NOT EXISTS kept (n int)")
                }
                let url =
                    "postgresql://tokengate@127.0.0.1:\(first.port),127.0.0.1:\(second.port)/tokengate"
                    + "?sslmode=disable&target_session_attrs=read-write"
                try await body(first, second, url)
            }
        }
    }
}
