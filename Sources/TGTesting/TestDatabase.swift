import Foundation
public import TGPostgres

/// Throwaway databases on the PostgreSQL cluster `make test` starts.
///
/// Tests that need PostgreSQL never skip: without `TOKENGATE_TEST_DATABASE_URL` they fail, saying
/// how to run them.
public enum TestDatabase {
    public struct NotConfigured: Error, CustomStringConvertible {
        public var description: String {
            "TOKENGATE_TEST_DATABASE_URL is not set: run the tests with `make test`, which starts a throwaway PostgreSQL"
        }
    }

    /// The URL of the cluster's `tokengate` database (a superuser may create databases there).
    public static func adminURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["TOKENGATE_TEST_DATABASE_URL"], !url.isEmpty else {
            throw NotConfigured()
        }
        return url
    }

    /// Creates a database of its own for `body` and drops it afterwards, so suites running in
    /// parallel never see each other's rows. With `migrations`, it starts with them applied: a
    /// copy of a template database migrated once per cluster (PostgreSQL copies a database's
    /// files faster than a test applies the schema; `Migrator` then finds nothing to do).
    public static func withFreshDatabase<T>(
        maxConnections: Int = 8,
        migrations: [Migration]? = nil,
        _ body: (PostgresClient, _ url: String) async throws -> T
    ) async throws -> T {
        let admin = try adminURL()
        let name = "tg_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let adminClient = PostgresClient(configuration: .init(url: admin))
        defer { adminClient.shutdown() }
        if let migrations {
            let template = try await migratedTemplate(migrations, admin: admin, adminClient: adminClient)
            try await adminClient.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name) TEMPLATE \(template)"))
        } else {
            try await adminClient.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        let url = try databaseURL(admin, name: name)
        var configuration = PostgresClient.Configuration(url: url)
        configuration.maxConnections = maxConnections
        let client = PostgresClient(configuration: configuration)
        do {
            let result = try await body(client, url)
            client.shutdown()
            try await adminClient.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)"))
            return result
        } catch {
            client.shutdown()
            _ = try? await adminClient.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(name) WITH (FORCE)"))
            throw error
        }
    }

    /// The name of a database with `migrations` applied and nobody connected (a template must
    /// have no connection while it is copied), made the first time it is asked for. Its name
    /// carries a digest of the migrations, so a changed schema never reuses an old template.
    static func migratedTemplate(_ migrations: [Migration], admin: String, adminClient: PostgresClient) async throws -> String {
        var digest: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a over every migration's version and SQL
        for migration in migrations {
            for byte in Array("\(migration.version)\u{0}\(migration.sql)\u{0}".utf8) {
                digest = (digest ^ UInt64(byte)) &* 0x100_0000_01b3
            }
        }
        let name = "tg_template_" + String(digest, radix: 16)
        // One maker at a time across processes; the others find it made.
        try await adminClient.withConnection { connection in
            let lock: Int64 = 0x5447_5465_6D70  // "TGTemp"
            _ = try await connection.queryIgnoringCancellation("SELECT pg_advisory_lock(\(lock))")
            let made: Result<Void, any Error>
            do { made = .success(try await makeTemplate(name, migrations, admin: admin, on: connection)) } catch { made = .failure(error) }
            _ = try await connection.queryIgnoringCancellation("SELECT pg_advisory_unlock(\(lock))")
            try made.get()
        }
        return name
    }

    private static func makeTemplate(_ name: String, _ migrations: [Migration], admin: String, on connection: PostgresConnection) async throws {
        let exists = try await connection.query("SELECT count(*) AS n FROM pg_database WHERE datname = \(name)")
        guard try exists.first?.decode(Int.self, "n") == 0 else { return }
        // Built under another name and renamed when complete: a run that dies half-way leaves
        // nothing that looks finished.
        let building = name + "_building"
        _ = try await connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(building) WITH (FORCE)"))
        _ = try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(building)"))
        let client = PostgresClient(configuration: .init(url: try databaseURL(admin, name: building)))
        defer { client.shutdown() }
        _ = try await Migrator(migrations: migrations).migrate(client)
        client.shutdown()
        _ = try await connection.query(PostgresQuery(unsafeSQL: "ALTER DATABASE \(building) RENAME TO \(name)"))
    }

    /// `url` with its database replaced by `name`.
    public static func databaseURL(_ url: String, name: String) throws -> String {
        guard var components = URLComponents(string: url) else { throw NotConfigured() }
        components.path = "/" + name
        guard let result = components.string else { throw NotConfigured() }
        return result
    }
}
