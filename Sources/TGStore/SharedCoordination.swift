public import Foundation
import TGPostgres

/// Per-account locks every instance shares (PostgreSQL advisory locks on a dedicated
/// connection, not a pooled one): one refresh of an account's grant at a time across the fleet.
public final class GrantLocks: Sendable {
    private let locks: PostgresAdvisoryLocks

    init(_ database: PostgresClient) {
        locks = PostgresAdvisoryLocks(configuration: database.configuration)
    }

    /// Runs `body` holding `account`'s lock. While another holder has it, `whileWaiting` is asked
    /// between attempts and its first non-nil answer is returned instead; past `deadline` this
    /// throws a ``StoreError``.
    public func withLock<T>(
        _ account: UUID,
        deadline: ContinuousClock.Instant,
        whileWaiting: () async throws -> T?,
        _ body: () async throws -> T
    ) async throws -> T {
        try await StoreError.mapping { try await locks.withLock(Self.key(account), deadline: deadline, whileWaiting: whileWaiting, body) }
    }

    /// The lock key of an account: its id's first 64 bits (a collision only makes two grants
    /// take turns).
    static func key(_ account: UUID) -> Int64 {
        let bytes = account.uuid
        let high = [bytes.0, bytes.1, bytes.2, bytes.3, bytes.4, bytes.5, bytes.6, bytes.7]
        return Int64(bitPattern: high.reduce(0) { $0 << 8 | UInt64($1) })
    }
}

/// What the schema's triggers announce (`NOTIFY tokengate_invalidate`, payload an account id)
/// whenever a session of an account ends or rotates, or the account, its grant or a stored
/// token goes.
public enum Invalidation: Sendable, Equatable {
    /// Whatever is held for this account is out of date.
    case account(UUID)
    /// The connection was lost and is back: notifications may have been missed.
    case reconnected
}

/// Every instance's changes as they commit, over a connection of its own (LISTEN).
public final class InvalidationFeed: Sendable {
    /// The channel the schema's triggers notify.
    public static let channel = "tokengate_invalidate"

    private let listener: PostgresListener
    public let events: AsyncStream<Invalidation>

    /// Starts listening on `url` (not a pooled connection: LISTEN holds its connection).
    public init(url: String) throws {
        let listener = try StoreError.mappingNow { try PostgresListener(url: url, channels: [Self.channel]) }
        self.listener = listener
        events = AsyncStream { continuation in
            let task = Task {
                for await event in listener.events {
                    switch event {
                    case .notification(_, let payload):
                        if let account = UUID(uuidString: payload) { continuation.yield(.account(account)) }
                    case .reconnected:
                        continuation.yield(.reconnected)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Stops listening; ``events`` ends.
    public func stop() { listener.stop() }
}

extension Store {
    /// Whether `error` came from the database (unreachable, timed out, refused a statement),
    /// rather than from the domain.
    public static func isDatabaseFailure(_ error: any Error) -> Bool { error is StoreError }
}
