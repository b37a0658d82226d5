public import TGPostgres

/// TokenGate's persistence: one store per aggregate, each with its SQL, over one PostgreSQL pool.
/// The domain (`TGAuth`) reads and writes through these and never sees SQL, a connection or a
/// row. Statements outside ``transaction(_:)`` each run on a pooled connection of their own;
/// inside it, on the transaction's.
public final class Store: Sendable {
    /// The pool (the app also hands it to health checks and maintenance commands).
    public let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    /// Sessions, outside a transaction.
    public var sessions: SessionStore { SessionStore(.pool(database)) }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    public func transaction<T>(_ body: (StoreTransaction) async throws -> T) async throws -> T {
        try await database.withTransaction { connection in
            try await body(StoreTransaction(connection: connection))
        }
    }
}

/// The stores inside one transaction: everything done through them commits or rolls back together.
public struct StoreTransaction: Sendable {
    /// The transaction's connection, for the statements of the domain that have not moved into
    /// a store yet (issue 16 moves them aggregate by aggregate).
    public let connection: PostgresConnection

    public var sessions: SessionStore { SessionStore(.connection(connection)) }
}

/// Where a store's statements run: a pooled connection per statement, or a transaction's.
enum Executor: Sendable {
    case pool(PostgresClient)
    case connection(PostgresConnection)

    @discardableResult
    func query(_ query: PostgresQuery) async throws -> PostgresRows {
        switch self {
        case .pool(let client): try await client.query(query)
        case .connection(let connection): try await connection.query(query)
        }
    }
}
