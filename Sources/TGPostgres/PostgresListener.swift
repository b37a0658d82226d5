import CLibPQ
import Foundation

/// What a listener reports.
public enum PostgresListenerEvent: Sendable, Equatable {
    /// A `NOTIFY` on a channel this listener listens to.
    case notification(channel: String, payload: String)
    /// The listening connection was lost and is back: notifications may have been missed meanwhile,
    /// so caches kept coherent by them should be dropped.
    case reconnected
}

/// LISTEN on a dedicated connection, on a thread of its own that waits on the socket. It
/// reconnects by itself (with back-off) and listens again to every channel.
public final class PostgresListener: @unchecked Sendable {
    // Invariants: `connection` is used only on the listener thread; `channels`, `running` and
    // `continuation` are only accessed with `lock` held.
    private let url: String
    private let applicationName: String
    // NSLock, not Mutex: taken on libpq's worker threads too, where ThreadSanitizer reports
    // Mutex hand-offs with Swift tasks falsely (docs/c-libraries.md).
    private let lock = NSLock()
    private var channels: Set<String>
    private var running = true
    private var connection: OpaquePointer?
    private let continuation: AsyncStream<PostgresListenerEvent>.Continuation
    /// Every notification and reconnection, in order. One consumer.
    public let events: AsyncStream<PostgresListenerEvent>

    /// Starts listening to `channels` (identifiers: letters, digits and `_`, at most 63 bytes), as
    /// `applicationName` in `pg_stat_activity`.
    public init(url: String, channels: [String], applicationName: String = "tokengate-listener") throws {
        for channel in channels where !Self.isValidChannel(channel) {
            throw PostgresError(.invalidArgument, detail: "invalid channel name")
        }
        self.url = url
        self.applicationName = applicationName
        self.channels = Set(channels)
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        let thread = Thread { [self] in self.loop() }
        thread.name = "tokengate-pg-listen"
        thread.start()
    }

    /// Stops the thread and ends ``events``.
    public func stop() {
        lock.withLock { running = false }
    }

    static func isValidChannel(_ channel: String) -> Bool {
        !channel.isEmpty && channel.utf8.count <= 63
            && channel.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }
    }

    private var isRunning: Bool { lock.withLock { running } }

    private func loop() {
        var backoff = 0.05
        var connectedBefore = false
        while isRunning {
            guard let connection = openAndListen() else {
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 2)
                continue
            }
            backoff = 0.05
            if connectedBefore { continuation.yield(.reconnected) }
            connectedBefore = true
            pump(connection)
            PQfinish(connection)
        }
        continuation.finish()
    }

    private func openAndListen() -> OpaquePointer? {
        let keywords = PostgresConnection.keepaliveKeywords + ["connect_timeout", "dbname", "application_name"]
        let connection = withCStrings(keywords) { keys in
            withCStrings(PostgresConnection.keepaliveValues + ["5", url, applicationName]) { values in
                PQconnectdbParams(keys, values, 1)
            }
        }
        guard let connection else { return nil }
        guard PQstatus(connection) == CONNECTION_OK else {
            PQfinish(connection)
            return nil
        }
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        let names = lock.withLock { channels }
        for channel in names {
            // Channel names were validated to [a-z0-9_]; identifiers cannot be bound.
            guard let result = PQexec(connection, "LISTEN \"\(channel)\"") else {
                PQfinish(connection)
                return nil
            }
            let ok = PQresultStatus(result) == PGRES_COMMAND_OK
            PQclear(result)
            if !ok {
                PQfinish(connection)
                return nil
            }
        }
        return connection
    }

    /// Waits on the socket (250 ms at a time, to notice `stop()`) and yields notifications until the
    /// connection fails or the listener stops. When the URL asks for a server that takes writes
    /// (`target_session_attrs=read-write` or `primary`, as with several hosts), it also leaves a
    /// server that stopped taking them (a primary demoted by a failover): the writes, and so the
    /// notifications, now happen elsewhere, and the next connection finds that server.
    private func pump(_ connection: OpaquePointer) {
        let followsThePrimary = ["read-write", "primary"].contains(Self.option("target_session_attrs", of: connection))
        var nextCheck = ContinuousClock.now + Self.writableCheckInterval
        while isRunning {
            if followsThePrimary, ContinuousClock.now >= nextCheck {
                guard Self.takesWrites(connection) else { return }
                nextCheck = ContinuousClock.now + Self.writableCheckInterval
                // Notifications that came in with the check's answer wait in libpq, not on the socket.
                deliverNotifications(connection)
            }
            let socket = PQsocket(connection)
            guard socket >= 0 else { return }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 250)
            if ready < 0, errno != EINTR { return }
            if ready <= 0 { continue }
            guard PQconsumeInput(connection) == 1, PQstatus(connection) == CONNECTION_OK else { return }
            deliverNotifications(connection)
        }
    }

    private func deliverNotifications(_ connection: OpaquePointer) {
        while let notify = PQnotifies(connection) {
            let channel = String(cString: notify.pointee.relname)
            let payload = String(cString: notify.pointee.extra)
            PQfreemem(notify)
            continuation.yield(.notification(channel: channel, payload: payload))
        }
    }
}

extension PostgresListener {
    /// How often a listener that follows the primary asks its server whether it still takes writes.
    static let writableCheckInterval = Duration.seconds(2)

    /// The value of a connection option in effect (from the URL or a default), if set.
    static func option(_ keyword: String, of connection: OpaquePointer) -> String? {
        guard let options = PQconninfo(connection) else { return nil }
        defer { PQconninfoFree(options) }
        var option = options
        while let name = option.pointee.keyword {
            if String(cString: name) == keyword { return option.pointee.val.map { String(cString: $0) } }
            option += 1
        }
        return nil
    }

    /// Whether the server takes writes now (neither in recovery nor read-only by default). A
    /// failed statement counts as no: the connection is left either way.
    static func takesWrites(_ connection: OpaquePointer) -> Bool {
        guard let result = PQexec(connection, "SELECT current_setting('transaction_read_only')") else { return false }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_TUPLES_OK, PQntuples(result) == 1 else { return false }
        return String(cString: PQgetvalue(result, 0, 0)) == "off"
    }
}

extension PostgresClient {
    /// Sends `payload` on `channel` (delivered to listeners when the current transaction commits).
    public func notify(channel: String, payload: String) async throws {
        try await query("SELECT pg_notify(\(channel), \(payload))")
    }
}

extension PostgresConnection {
    /// Sends `payload` on `channel` within this connection's transaction.
    public func notify(channel: String, payload: String) async throws {
        try await query("SELECT pg_notify(\(channel), \(payload))")
    }

    /// Waits for a transaction-scoped advisory lock. Use inside `withTransaction`.
    public func advisoryTransactionLock(_ key: Int64) async throws {
        try await query("SELECT pg_advisory_xact_lock(\(key))")
    }
}
