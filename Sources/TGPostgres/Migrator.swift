/// One forward-only schema change.
public struct Migration: Sendable, Equatable {
    public var version: Int
    public var name: String
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies migrations in order, each in its own transaction, recorded in `schema_migrations`.
///
/// Several instances may migrate at once: a transaction-scoped advisory lock serialises them and
/// each migration is applied once. A database whose schema is newer than the newest migration this
/// binary knows is refused, so an old binary never runs against a schema it does not understand.
public struct Migrator: Sendable {
    public let migrations: [Migration]
    /// Advisory-lock key shared by every TokenGate instance ("TGMIGRAT").
    static let lockKey: Int64 = 0x5447_4D49_4752_4154

    public init(migrations: [Migration]) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    public struct Status: Sendable, Equatable {
        /// Highest applied version (0 when none).
        public var current: Int
        public var pending: [Migration]
        /// The database has versions this binary does not know.
        public var databaseIsNewer: Bool
    }

    /// What is applied and what is pending.
    public func status(_ client: PostgresClient) async throws -> Status {
        try await client.withConnection { connection in
            let exists = try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
            guard try exists.first?.decode(Bool.self, "present") == true else { return status(applied: []) }
            return status(applied: try await appliedVersions(connection))
        }
    }

    /// Applies every pending migration; returns those it applied (empty when up to date).
    @discardableResult
    public func migrate(_ client: PostgresClient) async throws -> [Migration] {
        var applied: [Migration] = []
        while true {
            let next: Migration? = try await client.withTransaction { connection in
                try await connection.advisoryTransactionLock(Self.lockKey)
                try await createTable(connection)
                let status = status(applied: try await appliedVersions(connection))
                if status.databaseIsNewer {
                    throw MigrationError.databaseIsNewer(database: status.current, binary: migrations.last?.version ?? 0)
                }
                guard let migration = status.pending.first else { return nil }
                try await connection.simpleQuery(unsafeSQL: migration.sql)
                try await connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))"
                )
                return migration
            }
            guard let next else { return applied }
            applied.append(next)
        }
    }

    private func status(applied: Set<Int>) -> Status {
        let known = Set(migrations.map(\.version))
        let newest = migrations.last?.version ?? 0
        return Status(
            current: applied.max() ?? 0,
            pending: migrations.filter { !applied.contains($0.version) },
            databaseIsNewer: applied.contains { !known.contains($0) && $0 > newest }
        )
    }

    private func createTable(_ connection: PostgresConnection) async throws {
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
    }

    private func appliedVersions(_ connection: PostgresConnection) async throws -> Set<Int> {
        let rows = try await connection.query("SELECT version FROM schema_migrations")
        return Set(try rows.rows.map { try $0.decode(Int.self, "version") })
    }
}

/// Why migrating refused to run.
public enum MigrationError: Error, Equatable, CustomStringConvertible {
    case databaseIsNewer(database: Int, binary: Int)

    public var description: String {
        switch self {
        case .databaseIsNewer(let database, let binary):
            "database schema is at version \(database), newer than this binary's \(binary): run a newer TokenGate"
        }
    }
}
