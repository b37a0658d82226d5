public import Foundation
import TGPostgres

/// The rate limits' token buckets (`rate_limit_buckets`), shared by every instance: one per limit
/// (`scope`) and client address. Instances take tokens a few at a time and spend them from memory
/// (the app's `RateLimiter`); this is the one statement that takes them, for many addresses at once.
public struct RateLimitStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// What one take got: `granted` whole tokens (0 to what was asked), and the fraction of a token
    /// left in the bucket, from which the wait for the next one follows.
    public struct Take: Sendable, Equatable {
        public var granted: Int
        public var remaining: Double

        public init(granted: Int, remaining: Double) {
            self.granted = granted
            self.remaining = remaining
        }
    }

    /// Takes up to `want` tokens from the bucket of each client in `wants` (at most one entry per
    /// client), in the limit `scope`: each bucket refilled at `perSecond` up to `capacity` as of
    /// `now` first (a bucket never seen is full; its time never moves back, so an instance whose
    /// clock is behind refills nothing). One statement. Rows are locked in the clients' order, so
    /// two instances taking for overlapping clients at once wait for each other and never deadlock.
    public func take(scope: String, wants: [String: Int], capacity: Double, perSecond: Double, now: Date) async throws -> [String: Take] {
        guard !wants.isEmpty else { return [:] }
        struct Want: Encodable {
            var c: String
            var w: Int
        }
        let rows = String(decoding: try JSONEncoder().encode(wants.map { Want(c: $0.key, w: $0.value) }), as: UTF8.self)
        // The bucket refilled; `excluded.granted` is what this take asks for, capped at the capacity.
        let available: PostgresQuery = "LEAST(\(capacity), b.tokens + GREATEST(0, EXTRACT(EPOCH FROM \(now) - b.updated_at)) * \(perSecond))"
        let result = try await executor.query(
            """
            INSERT INTO rate_limit_buckets AS b (scope, client, tokens, updated_at, granted)
            SELECT \(scope), t.c, \(capacity) - LEAST(t.w, floor(\(capacity))), \(now), LEAST(t.w, floor(\(capacity)))
            FROM jsonb_to_recordset(\(rows)::jsonb) AS t(c text, w integer) ORDER BY t.c COLLATE "C"
            ON CONFLICT (scope, client) DO UPDATE SET
              granted = LEAST(excluded.granted, floor(\(fragment: available))),
              tokens = \(fragment: available) - LEAST(excluded.granted, floor(\(fragment: available))),
              updated_at = GREATEST(b.updated_at, excluded.updated_at)
            RETURNING client, granted, tokens
            """
        )
        var takes: [String: Take] = [:]
        for row in result.rows {
            takes[try row.value(String.self, "client")] = Take(
                granted: try row.value(Int.self, "granted"),
                remaining: try row.value(Double.self, "tokens")
            )
        }
        guard takes.count == wants.count else { throw StoreError.noRowReturned("rate_limit_buckets") }
        return takes
    }

    /// Removes up to `limit` buckets untouched since `before` (full again by then: a missing row
    /// is a full bucket).
    public func deleteIdle(before: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM rate_limit_buckets WHERE (scope, client) IN
              (SELECT scope, client FROM rate_limit_buckets WHERE updated_at < \(before) LIMIT \(limit))
            """
        ).affectedRows
    }
}
