import Foundation

/// Session-level advisory locks on one dedicated connection of this process (not one the pool
/// lends), for work that must hold a lock across slow steps that need no database, such as a
/// provider's answer. Many locks can be held at once on that connection; taking or giving one
/// back is a short statement, and nothing waits on a pooled connection meanwhile.
///
/// A lock is held by at most one holder of this process (the server would let the same session
/// take it twice) and one session of the whole cluster. When the process dies, the server
/// closes its connection and every lock it held is free at once. When that connection breaks
/// (a server restart), the locks held on it are gone: holders must not rely on the lock alone
/// for correctness (write with an optimistic version check).
public final class PostgresAdvisoryLocks: @unchecked Sendable {
    // Invariant: `held`, `current` and `connecting` are only accessed with `lock` held.
    // NSLock, not Mutex: taken on libpq's worker threads too, where ThreadSanitizer reports
    // Mutex hand-offs with Swift tasks falsely (docs/c-libraries.md).
    private let lock = NSLock()
    private var held: Set<Int64> = []
    private var current: PostgresConnection?
    private var connecting: Task<PostgresConnection, any Error>?
    private let configuration: PostgresClient.Configuration

    public init(configuration: PostgresClient.Configuration) {
        self.configuration = configuration
    }

    /// Takes `key` if no one holds it, here or elsewhere; true when taken. Give it back with
    /// ``unlock(_:)``.
    public func tryLock(_ key: Int64) async throws -> Bool {
        let reserved = lock.withLock { held.insert(key).inserted }
        guard reserved else { return false }
        do {
            if try await takeOnServer(key) { return true }
        } catch {
            _ = lock.withLock { held.remove(key) }
            throw error
        }
        _ = lock.withLock { held.remove(key) }
        return false
    }

    /// `pg_try_advisory_lock` on the dedicated connection. That connection may have died since
    /// its last statement (a server restart, a failover: nothing reads it in between), taking
    /// every lock held on it along: then the lock was not taken there, and the statement runs
    /// once more on a new connection (to the new primary) instead of failing the caller.
    private func takeOnServer(_ key: Int64) async throws -> Bool {
        let statement: PostgresQuery = "SELECT pg_try_advisory_lock(\(key)) AS taken"
        let rows: PostgresRows
        do {
            // Never cancelled half-way: see PostgresConnection.queryIgnoringCancellation.
            rows = try await connection().queryIgnoringCancellation(statement)
        } catch let error as PostgresError where error.isConnectionClosed {
            rows = try await connection().queryIgnoringCancellation(statement)
        }
        return try rows.first?.decode(Bool.self, "taken") == true
    }

    /// Gives `key` back, even when the calling task was cancelled. When the statement fails the
    /// connection is closed, which frees every lock held on it.
    public func unlock(_ key: Int64) async {
        defer { _ = lock.withLock { held.remove(key) } }
        guard let connection = try? await connection() else { return }
        do {
            try await connection.queryIgnoringCancellation("SELECT pg_advisory_unlock(\(key))")
        } catch {
            connection.discardAfterUse()
            forget(connection)
        }
    }

    /// Runs `body` holding `key`. While another holder has it, asks `whileWaiting` (which may
    /// end the wait with a result someone else produced) and tries again, waiting 20 ms, then
    /// twice as long each time up to 250 ms; past `deadline` it throws ``PostgresError`` with
    /// `isPoolTimeout`.
    public func withLock<T>(
        _ key: Int64,
        deadline: ContinuousClock.Instant,
        whileWaiting: () async throws -> T?,
        _ body: () async throws -> T
    ) async throws -> T {
        var pause = Duration.milliseconds(20)
        while true {
            if try await tryLock(key) {
                do {
                    let result = try await body()
                    await unlock(key)
                    return result
                } catch {
                    await unlock(key)
                    throw error
                }
            }
            if let result = try await whileWaiting() { return result }
            guard ContinuousClock.now + pause < deadline else { throw PostgresError(.poolTimeout) }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(250))
        }
    }

    /// Whether `key` is held by a holder of this process now.
    public func isHeldHere(_ key: Int64) -> Bool { lock.withLock { held.contains(key) } }

    /// The dedicated connection, opened on first use and again after it broke.
    private func connection() async throws -> PostgresConnection {
        let task = lock.withLock { () -> Task<PostgresConnection, any Error>? in
            if let current, !current.isBroken { return nil }
            current = nil
            if let connecting { return connecting }
            let configuration = configuration
            let task = Task {
                try await PostgresConnection.connect(
                    url: configuration.url,
                    connectTimeout: configuration.connectTimeout,
                    sessionSettings: ["TimeZone=UTC", "client_min_messages=warning"]
                )
            }
            connecting = task
            return task
        }
        guard let task else {
            if let current = lock.withLock({ current }) { return current }
            return try await connection()
        }
        let result = await task.result
        lock.withLock {
            guard connecting == task else { return }
            connecting = nil
            if case .success(let connection) = result { current = connection }
        }
        return try result.get()
    }

    private func forget(_ connection: PostgresConnection) {
        lock.withLock { if current === connection { current = nil } }
    }
}
