import Foundation
import TGPostgres
import TGTesting
import Testing

@Suite struct PoolTests {
    struct Rollback: Error {}

    @Test func commitsWhenTheTransactionBodyReturnsAndRollsBackWhenItThrows() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            try await client.query("CREATE TABLE t (n int)")
            try await client.withTransaction { try await $0.query("INSERT INTO t VALUES (1)") }
            await #expect(throws: Rollback.self) {
                try await client.withTransaction { connection in
                    try await connection.query("INSERT INTO t VALUES (2)")
                    throw Rollback()
                }
            }
            let rows = try await client.query("SELECT n FROM t ORDER BY n")
            #expect(try rows.rows.map { try $0.decode(Int.self, "n") } == [1])
        }
    }

    @Test func serialisesConcurrentIncrementsWithSelectForUpdate() async throws {
        try await TestDatabase.withFreshDatabase(maxConnections: 8) { client, _ async throws in
            try await client.query("CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL)")
            try await client.query("INSERT INTO counter VALUES (1, 0)")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        try await client.withTransaction { connection in
                            let rows = try await connection.query("SELECT n FROM counter WHERE id = 1 FOR UPDATE")
                            let n = try rows.first!.decode(Int.self, "n")
                            try await connection.query("UPDATE counter SET n = \(n + 1) WHERE id = 1")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let rows = try await client.query("SELECT n FROM counter")
            #expect(try rows.first?.decode(Int.self, "n") == 100)
            #expect(client.openConnections <= 8)
        }
    }

    @Test func runsSlowQueriesInParallelWithoutStarvingSwiftTasks() async throws {
        try await TestDatabase.withFreshDatabase(maxConnections: 8) { client, _ async throws in
            let started = ContinuousClock.now
            async let ticks: Int = {
                // Cooperative work that must keep running while 8 queries block their threads.
                var count = 0
                while ContinuousClock.now - started < .milliseconds(800) {
                    try? await Task.sleep(for: .milliseconds(10))
                    count += 1
                }
                return count
            }()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 { group.addTask { try await client.query("SELECT pg_sleep(1)") } }
                try await group.waitForAll()
            }
            let elapsed = ContinuousClock.now - started
            #expect(elapsed < .seconds(4), "8 × 1 s would be 8 s serially")
            #expect(await ticks >= 20)
        }
    }

    @Test func timesOutALeaseWhenEveryConnectionIsHeld() async throws {
        let url = try TestDatabase.adminURL()
        var configuration = PostgresClient.Configuration(url: url)
        configuration.maxConnections = 1
        configuration.acquireTimeout = .milliseconds(200)
        let client = PostgresClient(configuration: configuration)
        defer { client.shutdown() }
        try await client.withConnection { _ in
            let error = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
            #expect(error?.isPoolTimeout == true)
        }
        try await client.query("SELECT 1")  // free again
    }

    @Test func failsFastWithConnectionFailedWhenNothingListens() async throws {
        var configuration = PostgresClient.Configuration(url: "postgresql://tokengate@127.0.0.1:1/none")
        configuration.connectTimeout = .seconds(2)
        let client = PostgresClient(configuration: configuration)
        defer { client.shutdown() }
        let started = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        #expect(error?.isConnectionFailed == true)
        #expect(error?.isUnavailable == true)
        #expect(ContinuousClock.now - started < .seconds(5))  // refused at once, well within a loaded run
        #expect(client.openConnections == 0)
    }

    @Test func healsAfterTheServerDropsEveryPooledConnection() async throws {
        try await TestDatabase.withFreshDatabase(maxConnections: 4) { client, url async throws in
            // Open four connections and return them to the pool.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 { group.addTask { try await client.query("SELECT pg_sleep(0.05)") } }
                try await group.waitForAll()
            }
            #expect(client.openConnections == 4)
            // What a server restart does to them: terminate every backend of this database.
            let killer = PostgresClient(configuration: .init(url: url))
            defer { killer.shutdown() }
            let database = try await client.query("SELECT current_database() AS name").first!.decode(String.self, "name")
            try await killer.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = \(database) AND pid <> pg_backend_pid()"
            )
            try await Task.sleep(for: .milliseconds(100))
            // Every lease afterwards works: dead idle connections are noticed and replaced.
            for _ in 0..<6 {
                let value = try await client.query("SELECT 1 AS one").first?.decode(Int.self, "one")
                #expect(value == 1)
            }
        }
    }

    @Test func reportsConnectionClosedWhenTheBackendDiesMidQuery() async throws {
        try await TestDatabase.withFreshDatabase(maxConnections: 2) { client, url async throws in
            let killer = PostgresClient(configuration: .init(url: url))
            defer { killer.shutdown() }
            let error = await #expect(throws: PostgresError.self) {
                try await client.withConnection { connection in
                    let pid = try await connection.query("SELECT pg_backend_pid() AS pid").first!.decode(Int.self, "pid")
                    async let sleeping: Void = { _ = try await connection.query("SELECT pg_sleep(5)") }()
                    try await Task.sleep(for: .milliseconds(200))
                    try await killer.query("SELECT pg_terminate_backend(\(pid)::int)")
                    try await sleeping
                }
            }
            #expect(error?.isConnectionClosed == true, "\(String(reflecting: error))")
            let value = try await client.query("SELECT 1 AS one").first?.decode(Int.self, "one")
            #expect(value == 1)
        }
    }

    @Test func cancelsARunningQueryWhenItsTaskIsCancelled() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let started = ContinuousClock.now
            let task = Task { try await client.query("SELECT pg_sleep(10)") }
            try await Task.sleep(for: .milliseconds(200))
            task.cancel()
            let result = await task.result
            #expect(throws: PostgresError.self) { try result.get() }
            #expect(ContinuousClock.now - started < .seconds(7))  // the query would have taken 10 s
            let value = try await client.query("SELECT 2 AS two").first?.decode(Int.self, "two")
            #expect(value == 2)
        }
    }

    /// Cancellation can land before the statement left, while it travels, or while it runs: in
    /// every case the statement must end at once and the connection stay usable.
    @Test func cancelsAQueryWhereverItIsWhenItsTaskIsCancelled() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            for delay in [0, 0, 1, 2, 3, 5, 8, 13, 20] {
                let started = ContinuousClock.now
                let task = Task { try await client.query("SELECT pg_sleep(10)") }
                if delay > 0 { try await Task.sleep(for: .milliseconds(delay)) }
                task.cancel()
                let result = await task.result
                #expect(throws: PostgresError.self) { try result.get() }
                #expect(ContinuousClock.now - started < .seconds(5), "cancelled after \(delay) ms")
            }
            let value = try await client.query("SELECT 2 AS two").first?.decode(Int.self, "two")
            #expect(value == 2)
        }
    }

    /// A statement waiting behind another on the same connection is cancelled without touching
    /// the one that runs: a cancel request reaches whatever the server runs at that moment.
    @Test func cancellingAWaitingStatementNeitherRunsItNorCancelsTheRunningOne() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            try await client.withConnection { connection in
                let started = ContinuousClock.now
                let running = Task { try await connection.query("SELECT pg_sleep(0.5)") }
                try await Task.sleep(for: .milliseconds(100))
                let waiting = Task { try await connection.query("SELECT pg_sleep(10)") }
                try await Task.sleep(for: .milliseconds(100))
                waiting.cancel()
                let waitingError = await #expect(throws: PostgresError.self) { try await waiting.value }
                #expect(waitingError?.isCancelled == true)
                _ = try await running.value
                #expect(ContinuousClock.now - started < .seconds(5))
            }
        }
    }
}
