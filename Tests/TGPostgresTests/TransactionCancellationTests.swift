import Foundation
import TGPostgres
import TGTesting
import Testing

/// A request whose deadline cancels it inside a transaction must not hand its connection back
/// mid-transaction: the row locks it took are released and the next lease starts clean.
@Suite struct TransactionCancellationTests {
    /// Cancelled while its body waits on something else (the network, a sleep), holding a row lock.
    @Test func aTransactionCancelledBetweenStatementsRollsBackAndReleasesItsLocks() async throws {
        try await cancelHoldingALock(settle: .zero) { _ in try await Task.sleep(for: .seconds(30)) }  // a provider that does not answer
    }

    /// Cancelled while a statement of the transaction runs on the server.
    @Test func aTransactionCancelledDuringAStatementRollsBackAndReleasesItsLocks() async throws {
        // 100 ms: pg_sleep has started on the server.
        try await cancelHoldingALock(settle: .milliseconds(100)) { connection in try await connection.query("SELECT pg_sleep(30)") }
    }

    /// A transaction that locks and updates a row, then runs `rest`; cancelled once the lock is
    /// held (and `settle` later). Afterwards everything must be as if it never ran.
    private func cancelHoldingALock(settle: Duration, _ rest: @escaping @Sendable (PostgresConnection) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase(maxConnections: 1) { client, url async throws in
            try await client.query("CREATE TABLE grants (id int PRIMARY KEY, version int NOT NULL)")
            try await client.query("INSERT INTO grants VALUES (1, 0)")
            let locked = AsyncStream<Void>.makeStream()
            let task = Task {
                try await client.withTransaction { connection in
                    try await connection.query("SELECT version FROM grants WHERE id = 1 FOR UPDATE")
                    try await connection.query("UPDATE grants SET version = 99 WHERE id = 1")
                    locked.continuation.yield()
                    try await rest(connection)
                }
            }
            for await _ in locked.stream { break }
            if settle > .zero { try await Task.sleep(for: settle) }
            task.cancel()
            _ = await task.result
            try await expectCleanAfterCancellation(client, url: url)
        }
    }

    /// Cancelled at any moment, again and again: the pool's one connection always comes back idle.
    @Test func cancellationAtAnyPointNeverLeavesATransactionOpen() async throws {
        try await TestDatabase.withFreshDatabase(maxConnections: 1) { client, url async throws in
            try await client.query("CREATE TABLE grants (id int PRIMARY KEY, version int NOT NULL)")
            try await client.query("INSERT INTO grants VALUES (1, 0)")
            for delay in [0, 1, 2, 3, 5, 8] {
                let task = Task {
                    try await client.withTransaction { connection in
                        try await connection.query("SELECT version FROM grants WHERE id = 1 FOR UPDATE")
                        try await connection.query("UPDATE grants SET version = version + 1 WHERE id = 1")
                        try await connection.query("SELECT pg_sleep(0.002)")
                    }
                }
                if delay > 0 { try await Task.sleep(for: .milliseconds(delay)) }
                task.cancel()
                _ = await task.result
                #expect(try await openTransactionsSettle(url: url), "a transaction was still open after \(delay) ms")
            }
            try await expectLockFree(url: url)
        }
    }

    /// The row is free for another connection at once, the pool's connection is outside any
    /// transaction, and the change was rolled back.
    private func expectCleanAfterCancellation(_ client: PostgresClient, url: String) async throws {
        try await expectLockFree(url: url)
        #expect(try await openTransactions(url: url) == 0, "the pooled connection is still inside the transaction")
        let row = try await client.query("SELECT version FROM grants WHERE id = 1").first
        #expect(try row?.decode(Int.self, "version") == 0, "the cancelled transaction's update was kept")
    }

    /// No other connection to this database stays in a transaction: true once none is (checked
    /// every 10 ms, for 2 s at most). A connection the pool kept would stay in it for good; one it
    /// discarded (say, a cancel that PostgreSQL delivered late hit its ROLLBACK) is rolled back by the
    /// server when it sees the connection close, a moment after the lease ended.
    private func openTransactionsSettle(url: String) async throws -> Bool {
        for _ in 0..<200 {
            if try await openTransactions(url: url) == 0 { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// Other connections to this database that are not idle (in a transaction, open or failed).
    private func openTransactions(url: String) async throws -> Int {
        let other = PostgresClient(configuration: .init(url: url))
        defer { other.shutdown() }
        let rows = try await other.query(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'"
        )
        return try rows.first!.decode(Int.self, "n")
    }

    private func expectLockFree(url: String) async throws {
        let other = PostgresClient(configuration: .init(url: url))
        defer { other.shutdown() }
        // 55P03 (lock not available) here means the cancelled transaction still holds the row.
        try await other.withTransaction { connection in
            try await connection.query("SELECT version FROM grants WHERE id = 1 FOR UPDATE NOWAIT")
        }
    }
}
