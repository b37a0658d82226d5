public import TGPostgres

/// TokenGate's persistence: one store per aggregate, each with its SQL, over one PostgreSQL pool.
/// The domain (`TGAuth`) reads and writes through these and never sees SQL, a connection or a
/// row. Statements outside ``transaction(_:)`` each run on a pooled connection of their own;
/// inside it, on the transaction's.
public final class Store: Sendable {
    /// The pool (the app also hands it to health checks and maintenance commands).
    public let database: PostgresClient

    /// Per-account locks shared by every instance.
    public let grantLocks: GrantLocks

    public init(database: PostgresClient) {
        self.database = database
        grantLocks = GrantLocks(database)
    }

    /// Sessions, outside a transaction.
    public var sessions: SessionStore { SessionStore(.pool(database)) }
    public var accounts: AccountStore { AccountStore(.pool(database)) }
    public var devices: DeviceStore { DeviceStore(.pool(database)) }
    public var loginStates: LoginStateStore { LoginStateStore(.pool(database)) }
    public var revocations: RevocationStore { RevocationStore(.pool(database)) }
    public var keys: KeyStore { KeyStore(.pool(database)) }
    public var transferCodes: TransferCodeStore { TransferCodeStore(.pool(database)) }
    public var logoutTokens: LogoutTokenStore { LogoutTokenStore(.pool(database)) }
    public var securityEvents: SecurityEventStore { SecurityEventStore(.pool(database)) }
    public var dpopProofs: DPoPProofStore { DPoPProofStore(.pool(database)) }
    public var rateLimits: RateLimitStore { RateLimitStore(.pool(database)) }
    public var providerFaults: ProviderFaultStore { ProviderFaultStore(.pool(database)) }

    /// Runs `body` holding PostgreSQL's session advisory lock `key` (one holder across every
    /// instance), or returns nil at once when another holds it. The lock is given back whatever
    /// `body` did (an error, a cancelled task); a connection that cannot give it back is closed,
    /// which releases it.
    public func exclusively<T: Sendable>(lockKey key: Int64, _ body: () async throws -> T) async throws -> T? {
        try await StoreError.mapping { try await exclusivelyOnDriver(lockKey: key, body) }
    }

    private func exclusivelyOnDriver<T: Sendable>(lockKey key: Int64, _ body: () async throws -> T) async throws -> T? {
        try await database.withConnection { holder in
            // Not cancellable: a cancel that reached the statement after it took the lock would
            // leave the lock on the pooled connection with no one to give it back.
            let locked = try await holder.queryIgnoringCancellation("SELECT pg_try_advisory_lock(\(key)) AS locked")
            guard try locked.first?.value(Bool.self, "locked") == true else { return nil }
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            do {
                try await holder.queryIgnoringCancellation("SELECT pg_advisory_unlock(\(key))")
            } catch {
                holder.discardAfterUse()
            }
            return try result.get()
        }
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    public func transaction<T>(_ body: (StoreTransaction) async throws -> T) async throws -> T {
        try await StoreError.mapping {
            try await database.withTransaction { connection in
                try await body(StoreTransaction(connection: connection))
            }
        }
    }
}

/// The stores inside one transaction: everything done through them commits or rolls back together.
public struct StoreTransaction: Sendable {
    let connection: PostgresConnection

    public var sessions: SessionStore { SessionStore(.connection(connection)) }
    public var accounts: AccountStore { AccountStore(.connection(connection)) }
    public var devices: DeviceStore { DeviceStore(.connection(connection)) }
    public var loginStates: LoginStateStore { LoginStateStore(.connection(connection)) }
    public var revocations: RevocationStore { RevocationStore(.connection(connection)) }
    public var keys: KeyStore { KeyStore(.connection(connection)) }
    public var transferCodes: TransferCodeStore { TransferCodeStore(.connection(connection)) }
    public var logoutTokens: LogoutTokenStore { LogoutTokenStore(.connection(connection)) }
    public var securityEvents: SecurityEventStore { SecurityEventStore(.connection(connection)) }
    public var dpopProofs: DPoPProofStore { DPoPProofStore(.connection(connection)) }
    public var providerFaults: ProviderFaultStore { ProviderFaultStore(.connection(connection)) }
}

/// Where a store's statements run: a pooled connection per statement, or a transaction's.
enum Executor: Sendable {
    case pool(PostgresClient)
    case connection(PostgresConnection)

    @discardableResult
    func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await StoreError.mapping {
            switch self {
            case .pool(let client): try await client.query(query)
            case .connection(let connection): try await connection.query(query)
            }
        }
    }
}
