import TGPostgres
import TGTesting
import Testing

@Suite struct MigratorTests {
    let first = Migration(version: 1, name: "first", sql: "CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int);")
    let second = Migration(version: 2, name: "second", sql: "ALTER TABLE a ADD COLUMN note text;")

    func tables(_ client: PostgresClient) async throws -> [String] {
        let rows = try await client.query(
            "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name"
        )
        return try rows.rows.map { try $0.decode(String.self, "name") }
    }

    @Test func appliesPendingMigrationsInOrderAndIsIdempotent() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let migrator = Migrator(migrations: [second, first])
            #expect(try await migrator.status(client).pending.map(\.version) == [1, 2])
            #expect(try await migrator.migrate(client).map(\.version) == [1, 2])
            #expect(try await migrator.migrate(client).isEmpty)
            let status = try await migrator.status(client)
            #expect(status.current == 2)
            #expect(status.pending.isEmpty)
            #expect(try await tables(client) == ["a", "b", "schema_migrations"])
        }
    }

    @Test func refusesADatabaseNewerThanTheBinary() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            try await Migrator(migrations: [first, second]).migrate(client)
            let older = Migrator(migrations: [first])
            #expect(try await older.status(client).databaseIsNewer)
            await #expect(throws: MigrationError.databaseIsNewer(database: 2, binary: 1)) { try await older.migrate(client) }
        }
    }

    @Test func rollsBackAFailingMigrationEntirely() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let broken = Migration(version: 2, name: "broken", sql: "CREATE TABLE c (id int); SELECT no_such_function();")
            await #expect(throws: PostgresError.self) { try await Migrator(migrations: [first, broken]).migrate(client) }
            #expect(try await tables(client) == ["a", "b", "schema_migrations"])
            #expect(try await Migrator(migrations: [first, broken]).status(client).current == 1)
        }
    }

    @Test func appliesEachMigrationOnceWhenInstancesMigrateConcurrently() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let migrator = Migrator(migrations: [first, second])
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 { group.addTask { try await migrator.migrate(client).count } }
                return try await group.reduce(0, +)
            }
            #expect(applied == 2)
            let rows = try await client.query("SELECT count(*) AS n FROM schema_migrations")
            #expect(try rows.first?.decode(Int.self, "n") == 2)
        }
    }
}
