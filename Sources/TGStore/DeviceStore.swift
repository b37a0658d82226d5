public import Foundation
import TGPostgres

/// The `devices` table: an app install, known by the hash of its `device_secret`.
public struct DeviceStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// The device of `client` whose secret hashes to `secretHash`, if it was seen after
    /// `seenSince`; marked as seen now.
    public func touch(secretHash: TokenHash, client: String, seenSince: Date, now: Date) async throws -> UUID? {
        let rows = try await executor.query(
            """
            UPDATE devices SET last_seen_at = \(now) WHERE secret_hash = \(secretHash) AND client_id = \(client)
              AND last_seen_at > \(seenSince)
            RETURNING id
            """
        )
        return try rows.first?.value(UUID.self, "id")
    }

    /// Marks the device of `session` as seen now (a device in use keeps its secret alive).
    public func touch(deviceOfSession session: UUID, now: Date) async throws {
        try await executor.query("UPDATE devices SET last_seen_at = \(now) WHERE id = (SELECT device_id FROM sessions WHERE id = \(session))")
    }

    /// A new device of `client`, known by `secretHash`.
    public func create(secretHash: TokenHash, client: String, now: Date) async throws -> UUID {
        let rows = try await executor.query(
            """
            INSERT INTO devices (secret_hash, client_id, created_at, last_seen_at)
            VALUES (\(secretHash), \(client), \(now), \(now)) RETURNING id
            """
        )
        guard let row = rows.first else { throw StoreError.noRowReturned("devices") }
        return try row.value(UUID.self, "id")
    }

    /// Removes a device: its sessions and pending logins go with it; its transfer codes then name
    /// no device (and restore nothing).
    public func delete(_ device: UUID) async throws {
        try await executor.query("DELETE FROM devices WHERE id = \(device)")
    }

    /// Removes up to `limit` devices without a session that were last seen before `seenBefore`.
    public func deleteIdle(seenBefore: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM devices WHERE id IN (SELECT d.id FROM devices d
              WHERE d.last_seen_at <= \(seenBefore) AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.device_id = d.id)
              LIMIT \(limit))
            """
        ).affectedRows
    }
}
