import Foundation
import TGPostgres
import TGStore
import TGTesting
import Testing

@Suite struct SchemaMigrationsTests {
    @Test func listsEveryFileOfDbMigrationsInOrder() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../db/migrations").standardized
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }.sorted()
        let listed = SchemaMigrations.all.map { String(format: "%04d_%@.sql", $0.version, $0.name) }
        #expect(listed == files)
        for migration in SchemaMigrations.all {
            let onDisk = try String(
                contentsOf: directory.appendingPathComponent(String(format: "%04d_%@.sql", migration.version, migration.name)),
                encoding: .utf8
            )
            #expect(onDisk == migration.sql)
        }
    }

    @Test func appliesTheWholeSchemaToAnEmptyDatabase() async throws {
        try await TestDatabase.withFreshDatabase { client, _ async throws in
            let applied = try await Migrator(migrations: SchemaMigrations.all).migrate(client)
            #expect(applied.count == SchemaMigrations.all.count)
            let rows = try await client.query(
                "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name"
            )
            let tables = try rows.rows.map { try $0.decode(String.self, "name") }
            #expect(
                tables == [
                    "accounts", "devices", "dpop_proofs", "grant_rejections", "handoff_codes", "logout_token_ids", "pending_logins",
                    "provider_faults",
                    "rate_limit_buckets", "revoked_refresh_tokens", "schema_migrations", "security_event_token_ids", "sessions", "suspended_sessions",
                    "transfer_codes",
                    "upstream_access_tokens", "upstream_grants", "upstream_revocations",
                ]
            )
        }
    }
}
