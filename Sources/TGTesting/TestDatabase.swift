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
    /// parallel never see each other's rows.
    public static func withFreshDatabase<T>(
        maxConnections: Int = 8,
        _ body: (PostgresClient, _ url: String) async throws -> T
    ) async throws -> T {
        let admin = try adminURL()
        let name = "tg_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let adminClient = PostgresClient(configuration: .init(url: admin))
        defer { adminClient.shutdown() }
        try await adminClient.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
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

    /// `url` with its database replaced by `name`.
    public static func databaseURL(_ url: String, name: String) throws -> String {
        guard var components = URLComponents(string: url) else { throw NotConfigured() }
        components.path = "/" + name
        guard let result = components.string else { throw NotConfigured() }
        return result
    }
}
