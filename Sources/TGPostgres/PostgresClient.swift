import Foundation
import TGBase

/// A bounded pool of PostgreSQL connections, lent only inside ``withConnection(_:)`` and
/// ``withTransaction(isolation:_:)``.
///
/// Connections are opened lazily up to `maxConnections`. A connection found broken (the server
/// restarted, the backend was terminated) is discarded and the next lease gets a new one: the pool
/// heals by itself. Work that failed because its connection died reports `isConnectionClosed`; the
/// pool never retries it silently.
public final class PostgresClient: @unchecked Sendable {
    public struct Configuration: Sendable {
        /// libpq connection URI (`postgresql://user@host:port/db?sslmode=…`) or key/value string.
        public var url: String
        public var maxConnections: Int = 10
        /// How long a lease waits for a free connection before `isPoolTimeout`.
        public var acquireTimeout: Duration = .seconds(5)
        public var connectTimeout: Duration = .seconds(5)
        /// Server-side limit per statement (`statement_timeout`); nil for the server's default.
        public var statementTimeout: Duration? = .seconds(30)

        public init(url: String) { self.url = url }
    }

    public enum IsolationLevel: String, Sendable {
        case readCommitted = "READ COMMITTED"
        case repeatableRead = "REPEATABLE READ"
        case serializable = "SERIALIZABLE"
    }

    // Invariant: `idle`, `open`, `waiters` and `closed` are only accessed with `lock` held.
    // NSLock, not Mutex: taken on libpq's worker threads too, where ThreadSanitizer reports
    // Mutex hand-offs with Swift tasks falsely (docs/c-libraries.md).
    private let lock = NSLock()
    private var idle: [PostgresConnection] = []
    private var open = 0
    private var waiters: [(id: UInt64, continuation: CheckedContinuation<Grant, any Error>)] = []
    private var nextWaiterID: UInt64 = 0
    private var closed = false
    public let configuration: Configuration

    /// What a waiting lease is handed: a connection, or the right to open one.
    private enum Grant: @unchecked Sendable {
        // Invariant: a granted connection is owned by exactly one lease.
        case connection(PostgresConnection)
        case slot
    }

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Lends a connection for the duration of `body`. It goes back to the pool only idle and
    /// outside any transaction, whatever happened to `body` (an error, a cancelled task): an open
    /// transaction is rolled back, and a connection that cannot be made clean is closed.
    @discardableResult
    public func withConnection<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await acquire()
        do {
            let result = try await body(connection)
            await settle(connection)
            release(connection)
            return result
        } catch {
            await settle(connection)
            release(connection)
            throw error
        }
    }

    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws. Both run
    /// even when the task was cancelled meanwhile (a request past its deadline), so a transaction
    /// never outlives its lease holding row locks.
    @discardableResult
    public func withTransaction<T>(
        isolation: IsolationLevel = .readCommitted,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "BEGIN ISOLATION LEVEL \(isolation.rawValue)"))
            let result: T
            do {
                result = try await body(connection)
            } catch {
                if !connection.isBroken { _ = try? await connection.queryIgnoringCancellation("ROLLBACK") }
                throw error
            }
            try await connection.queryIgnoringCancellation("COMMIT")
            return result
        }
    }

    /// Makes a returned connection clean: a transaction left open (or failed) is rolled back; if
    /// that does not leave it idle, it is marked broken and closed by ``release(_:)``.
    private func settle(_ connection: PostgresConnection) async {
        guard !connection.isBroken, !connection.isIdleOutsideTransaction else { return }
        _ = try? await connection.queryIgnoringCancellation("ROLLBACK")
        if !connection.isIdleOutsideTransaction { connection.discardAfterUse() }
    }

    /// Runs one statement on a pooled connection.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withConnection { try await $0.query(query) }
    }

    /// Connections open now (idle or lent).
    public var openConnections: Int { lock.withLock { open } }

    /// Open connections not lent to anyone now.
    public var idleConnections: Int { lock.withLock { idle.count } }

    /// Tasks waiting for a connection now.
    public var waitingForConnection: Int { lock.withLock { waiters.count } }

    /// Closes idle connections and refuses new leases; lent connections close when returned.
    public func shutdown() {
        let (toClose, pending) = lock.withLock {
            closed = true
            let toClose = idle
            idle.removeAll()
            open -= toClose.count
            let pending = waiters
            waiters.removeAll()
            return (toClose, pending)
        }
        _ = toClose
        for waiter in pending { waiter.continuation.resume(throwing: PostgresError(.poolClosed)) }
    }

    private func acquire() async throws -> PostgresConnection {
        enum Next {
            case use(PostgresConnection)
            case connect
            case wait
        }
        while true {
            let next: Next = try lock.withLock {
                if closed { throw PostgresError(.poolClosed) }
                if let connection = idle.popLast() { return .use(connection) }
                if open < configuration.maxConnections {
                    open += 1
                    return .connect
                }
                return .wait
            }
            switch next {
            case .use(let connection):
                if connection.isAliveWhileIdle() { return connection }
                discard(connection)
            case .connect:
                return try await connect()
            case .wait:
                switch try await waitForGrant() {
                case .connection(let connection):
                    if connection.isAliveWhileIdle() { return connection }
                    discard(connection)
                case .slot:
                    return try await connect()
                }
            }
        }
    }

    /// Opens a connection for a slot already counted in `open`.
    private func connect() async throws -> PostgresConnection {
        var settings = ["TimeZone=UTC", "DateStyle=ISO,MDY", "client_min_messages=warning"]
        if let timeout = configuration.statementTimeout {
            settings.append("statement_timeout=\(timeout.wholeMilliseconds)")
        }
        do {
            return try await PostgresConnection.connect(
                url: configuration.url,
                connectTimeout: configuration.connectTimeout,
                sessionSettings: settings
            )
        } catch {
            giveBackSlot()
            throw error
        }
    }

    private func waitForGrant() async throws -> Grant {
        let id = lock.withLock {
            nextWaiterID += 1
            return nextWaiterID
        }
        let timeout = configuration.acquireTimeout
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.expireWaiter(id, error: PostgresError(.poolTimeout))
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let enqueued = lock.withLock {
                    if closed { return false }
                    waiters.append((id, continuation))
                    return true
                }
                if !enqueued { continuation.resume(throwing: PostgresError(.poolClosed)) }
            }
        } onCancel: {
            self.expireWaiter(id, error: PostgresError(.cancelled))
        }
    }

    private func expireWaiter(_ id: UInt64, error: PostgresError) {
        let waiter = lock.withLock { () -> CheckedContinuation<Grant, any Error>? in
            guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return waiters.remove(at: index).continuation
        }
        waiter?.resume(throwing: error)
    }

    private func release(_ connection: PostgresConnection) {
        if connection.isBroken {
            discard(connection)
            return
        }
        connection.lastUsed = .now
        let waiter = lock.withLock { () -> CheckedContinuation<Grant, any Error>? in
            if closed {
                open -= 1
                return nil
            }
            if !waiters.isEmpty { return waiters.removeFirst().continuation }
            idle.append(connection)
            return nil
        }
        waiter?.resume(returning: .connection(connection))
    }

    /// Drops a broken connection; a waiter, if any, may open a new one in its place.
    private func discard(_ connection: PostgresConnection) {
        _ = connection
        giveBackSlot()
    }

    private func giveBackSlot() {
        let waiter = lock.withLock { () -> CheckedContinuation<Grant, any Error>? in
            if !closed, !waiters.isEmpty { return waiters.removeFirst().continuation }
            open -= 1
            return nil
        }
        waiter?.resume(returning: .slot)
    }
}
