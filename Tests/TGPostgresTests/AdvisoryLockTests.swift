import TGPostgres
import TGTesting
import Testing

/// Session-level advisory locks (the refresh single-flight across instances, the one sweeper):
/// a lock given back is free for others at once, and no other lock on the same connection goes
/// with it.
@Suite struct AdvisoryLockTests {
    @Test func statementsThatIgnoreCancellationStillBindTheirParameters() async throws {
        try await TestDatabase.withFreshDatabase(maxConnections: 1) { client, _ async throws in
            let rows = try await client.withConnection { connection in
                try await connection.queryIgnoringCancellation("SELECT \(Int64(41)) + 1 AS n")
            }
            #expect(try rows.first?.decode(Int.self, "n") == 42)
        }
    }

    @Test func givingOneLockBackKeepsTheOthersHeldOnTheSameConnection() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let locks = PostgresAdvisoryLocks(configuration: client.configuration)
            #expect(try await locks.tryLock(1))
            #expect(try await locks.tryLock(2))
            #expect(try await heldKeys(client) == [1, 2])
            await locks.unlock(1)
            #expect(try await heldKeys(client) == [2], "unlocking 1 must not close the connection that holds 2")
            #expect(try await locks.tryLock(1), "the lock given back is free again")
            #expect(try await heldKeys(client) == [1, 2])
            await locks.unlock(1)
            await locks.unlock(2)
            #expect(try await heldKeys(client) == [])
        }
    }

    @Test func aCancelledTaskThatTookALockIsToldSoAndCanGiveItBack() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let locks = PostgresAdvisoryLocks(configuration: client.configuration)
            let taken = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await locks.tryLock(7)
            }
            #expect(try await taken.value, "taking a free lock is not cut short by cancellation")
            #expect(try await heldKeys(client) == [7])
            await locks.unlock(7)
            #expect(try await heldKeys(client) == [])
        }
    }

    /// The advisory keys held in this database now, by anyone (the low 32 bits: the keys here are small).
    private func heldKeys(_ client: PostgresClient) async throws -> [Int] {
        let rows = try await client.query(
            """
            SELECT objid::text::int AS key FROM pg_locks
            WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            ORDER BY key
            """
        )
        return try (0..<rows.count).map { try rows[$0].decode(Int.self, "key") }
    }
}
