import CLibPQ
import Foundation

/// One PostgreSQL connection, lent by ``PostgresClient`` inside `withConnection`/`withTransaction`
/// only. Do not keep it past the closure.
public final class PostgresConnection: @unchecked Sendable {
    // Invariants:
    // - `connection` is used only by jobs on `worker` (one at a time), or by the lease holder while
    //   no job runs (the health check at checkout); it is freed by `close()` on the worker.
    // - `broken` is only accessed with `lock` held.
    // - `executions`, `executing`, `cancelledExecution` and `cancelsInFlight` are only accessed
    //   with `cancellation` locked, which is never held across I/O (a pooled task may wait on it).
    // - `cancelHandle` is set in init and freed in deinit; PQcancel is documented as safe to call
    //   from any thread.
    private var connection: OpaquePointer?
    private let worker: WorkerThread
    // NSLock, not Mutex: taken on libpq's worker threads too, where ThreadSanitizer reports
    // Mutex hand-offs with Swift tasks falsely (docs/c-libraries.md).
    private let lock = NSLock()
    private let cancelHandle: OpaquePointer?
    private var broken = false
    // A condition variable (the worker waits while a cancel request is on its way), which Mutex lacks.
    private let cancellation = NSCondition()
    /// Statements submitted so far; each execution's number.
    private var executions: UInt64 = 0
    /// The execution the worker is running now, if any.
    private var executing: UInt64?
    /// The latest execution whose task was cancelled.
    private var cancelledExecution: UInt64?
    /// Cancel requests on their way to the server; no statement starts while one is.
    private var cancelsInFlight = 0
    /// When the connection was last returned to the pool (for idle checks).
    var lastUsed = ContinuousClock.now

    private init(connection: OpaquePointer, worker: WorkerThread) {
        self.connection = connection
        self.worker = worker
        self.cancelHandle = PQgetCancel(connection)
    }

    /// Opens a connection on a worker thread of its own. `url` is a libpq connection URI or
    /// key/value string; it is never logged.
    static func connect(url: String, connectTimeout: Duration, sessionSettings: [String]) async throws -> PostgresConnection {
        let worker = WorkerThread(name: "tokengate-pg")
        let seconds = max(1, Int(connectTimeout.components.seconds))
        let options = sessionSettings.map { "-c \($0)" }.joined(separator: " ")
        let raw: OpaquePointer
        do {
            raw = try await worker.run {
                // Keepalives and the connect timeout first, so that the URL can override them
                // (`connect_timeout=2` bounds each host of a multi-host URL): a server that
                // vanished without closing its connections (a host lost in a failover) is noticed
                // in about 20 s instead of the kernel's two hours.
                let keywords = Self.keepaliveKeywords + ["connect_timeout", "dbname", "application_name", "options"]
                let values = Self.keepaliveValues + [String(seconds), url, "tokengate", options]
                let connection = withCStrings(keywords) { keys in
                    withCStrings(values) { vals in PQconnectdbParams(keys, vals, 1) }
                }
                guard let connection else { throw PostgresError(.connectionFailed, detail: "out of memory") }
                guard PQstatus(connection) == CONNECTION_OK else {
                    let message = String(cString: PQerrorMessage(connection))
                    PQfinish(connection)
                    throw PostgresError(.connectionFailed, detail: message)
                }
                PQsetNoticeProcessor(connection, { _, _ in }, nil)
                return UncheckedPointer(connection)
            }.pointer
        } catch {
            worker.stop()
            throw error
        }
        return PostgresConnection(connection: raw, worker: worker)
    }

    /// TCP keepalives of every connection (pooled, LISTEN, advisory locks): first probe after
    /// 10 s idle, then every 3 s, given up after 3 unanswered.
    static let keepaliveKeywords = ["keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count"]
    static let keepaliveValues = ["1", "10", "3", "3"]

    deinit {
        if let cancelHandle { PQfreeCancel(cancelHandle) }
        if let connection { PQfinish(connection) }
        worker.stop()
    }

    /// True once the connection failed at the connection level; the pool then discards it.
    public var isBroken: Bool { lock.withLock { broken } }

    /// Runs one statement with bound parameters and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await execute { connection in try self.run(query, on: connection) }
    }

    /// Runs a statement that must run even when the calling task is cancelled: the end of a
    /// transaction (COMMIT, ROLLBACK), or taking and giving back a session-level advisory lock.
    /// A session lock outlives a statement that failed after taking it, so a cancel request that
    /// reached `pg_try_advisory_lock` late would leave the lock held with the caller told it was
    /// not. No cancel request is ever sent for these statements. `statement_timeout` still
    /// bounds them.
    @discardableResult
    public func queryIgnoringCancellation(_ query: PostgresQuery) async throws -> PostgresRows {
        try await execute(cancellable: false) { connection in try self.run(query, on: connection) }
    }

    /// On the worker thread: sends `query` with its bound parameters and reads its rows.
    private func run(_ query: PostgresQuery, on connection: OpaquePointer) throws -> PostgresRows {
        let types = query.binds.map { Oid($0.typeOID) }
        let texts = query.binds.map(\.text)
        let result = withOptionalCStrings(texts) { values in
            PQexecParams(connection, query.sql, Int32(types.count), types, values, nil, nil, 0)
        }
        return try rows(from: result, connection: connection)
    }

    /// Whether the server sees this connection outside any transaction (not in one, not in a
    /// failed one). Only while no statement runs, i.e. by the lease holder.
    var isIdleOutsideTransaction: Bool {
        guard let connection, !isBroken else { return false }
        return PQtransactionStatus(connection) == PQTRANS_IDLE
    }

    /// Marks the connection unusable, so the pool closes it instead of lending it again (for a
    /// lease holder that could not undo session state, such as an advisory lock).
    public func discardAfterUse() {
        lock.withLock { broken = true }
    }

    /// Runs SQL text that may hold several statements (migrations); nothing is bound.
    public func simpleQuery(unsafeSQL sql: String) async throws {
        _ = try await execute { connection in
            try self.rows(from: PQexec(connection, sql), connection: connection)
        }
    }

    /// Runs `work` on the worker. Cancelling the calling task cancels this execution whatever
    /// its stage: not started yet, it never starts; running, the server is asked to cancel it
    /// until it ends (a cancel request that arrives before the statement does cancels nothing).
    ///
    /// With `cancellable: false` the calling task's cancellation is ignored (the statement ends a
    /// transaction, which must happen whatever the caller's fate).
    private func execute(
        cancellable: Bool = true,
        _ work: @escaping @Sendable (OpaquePointer) throws -> PostgresRows
    ) async throws -> PostgresRows {
        if cancellable, Task.isCancelled { throw PostgresError(.cancelled) }
        guard let connection, !isBroken else { throw PostgresError(.connectionClosed, detail: "connection already broken") }
        let handle = UncheckedPointer(connection)
        let execution = cancellation.withLock {
            executions += 1
            return executions
        }
        let job = { @Sendable in
            try await self.worker.run {
                try self.begin(execution)
                defer { self.end(execution) }
                return try work(handle.pointer)
            }
        }
        guard cancellable else { return try await job() }
        return try await withTaskCancellationHandler {
            try await job()
        } onCancel: {
            self.cancel(execution)
        }
    }

    /// On the worker thread, right before the statement is sent. Waits while a cancel request
    /// is on its way, so that request cannot hit this statement instead of the one it was for.
    private func begin(_ execution: UInt64) throws {
        cancellation.lock()
        defer { cancellation.unlock() }
        while cancelsInFlight > 0 { cancellation.wait() }
        if cancelledExecution == execution { throw PostgresError(.cancelled) }
        executing = execution
    }

    private func end(_ execution: UInt64) {
        cancellation.withLock { if executing == execution { executing = nil } }
    }

    /// Cancels `execution`: marks it so it never starts, and while it runs, asks the server to
    /// cancel it every 50 ms (for 2 s at most; `statement_timeout` bounds the rest). PQcancel
    /// opens a connection of its own and blocks, so it runs on a thread of its own, with no lock
    /// held that any task could wait for.
    func cancel(_ execution: UInt64) {
        let running = cancellation.withLock {
            cancelledExecution = execution
            return executing == execution
        }
        guard running, let cancelHandle else { return }
        let handle = UncheckedPointer(cancelHandle)
        let thread = Thread { [self] in
            for _ in 0..<40 {
                let stillRunning = cancellation.withLock { () -> Bool in
                    guard executing == execution else { return false }
                    cancelsInFlight += 1
                    return true
                }
                guard stillRunning else { return }
                var buffer = [CChar](repeating: 0, count: 256)
                _ = PQcancel(handle.pointer, &buffer, Int32(buffer.count))
                cancellation.withLock {
                    cancelsInFlight -= 1
                    cancellation.broadcast()
                }
                usleep(50_000)
            }
        }
        thread.start()
    }

    private func rows(from result: OpaquePointer?, connection: OpaquePointer) throws -> PostgresRows {
        guard let result else {
            markBrokenIfBad(connection)
            throw PostgresError(isBroken ? .connectionClosed : .server, detail: String(cString: PQerrorMessage(connection)))
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            let rowCount = Int(PQntuples(result))
            let columnCount = Int(PQnfields(result))
            let columns = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
            var values: [[String?]] = []
            values.reserveCapacity(rowCount)
            for row in 0..<rowCount {
                values.append(
                    (0..<columnCount).map { column in
                        PQgetisnull(result, Int32(row), Int32(column)) == 1
                            ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
                    }
                )
            }
            let affected = Int(String(cString: PQcmdTuples(result))) ?? rowCount
            return PostgresRows(columns: columns, values: values, affectedRows: affected)
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { SQLState(rawValue: String(cString: $0)) }
            let message = String(cString: PQresultErrorMessage(result))
            markBrokenIfBad(connection)
            if let state, state.errorClass == "08" || Self.leavesTheServer.contains(state) {
                lock.withLock { broken = true }
            }
            if isBroken { throw PostgresError(.connectionClosed, sqlState: state, detail: message) }
            if state == .queryCanceled { throw PostgresError(.cancelled, sqlState: state, detail: message) }
            throw PostgresError(.server, sqlState: state, detail: message)
        }
    }

    /// Errors after which this server is no place for the connection: it is shutting down, or it
    /// no longer takes writes (a primary demoted by a failover answers 25006 to a connection
    /// opened while it was primary). The connection is dropped, and the next one libpq opens goes
    /// where the URL says (`target_session_attrs=read-write` finds the new primary).
    static let leavesTheServer: Set<SQLState> = [.adminShutdown, .crashShutdown, .cannotConnectNow, .readOnlySQLTransaction]

    private func markBrokenIfBad(_ connection: OpaquePointer) {
        if PQstatus(connection) != CONNECTION_OK { lock.withLock { broken = true } }
    }

    /// Checks, without blocking, that the server has not closed an idle connection. A pooled
    /// connection never LISTENs, so an idle one has nothing to read unless the server is ending it
    /// (restart, terminated backend: an error message, then end of file): readable means dead.
    func isAliveWhileIdle() -> Bool {
        guard let connection, !isBroken else { return false }
        let socket = PQsocket(connection)
        guard socket >= 0 else { return false }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        if poll(&descriptor, 1, 0) == 0, PQstatus(connection) == CONNECTION_OK { return true }
        lock.withLock { broken = true }
        return false
    }
}

/// Carries a C pointer across an isolation boundary. Only for pointers whose owner guarantees
/// exclusive use (a connection used by one job at a time).
struct UncheckedPointer: @unchecked Sendable {
    // Invariant: the owner never uses the pointee from two threads at once.
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    withOptionalCStrings(strings.map { Optional($0) }, body)
}

/// Passes C copies of `strings` (NULL for nil), terminated by a NULL pointer, to `body`.
func withOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { $0.map { strdup($0)! } }
    defer {
        for copy in copies { free(copy) }
    }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
