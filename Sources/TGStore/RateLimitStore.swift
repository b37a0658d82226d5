public import Foundation
import TGPostgres

/// The rate limits' token buckets (`rate_limit_buckets`), shared by every instance: one per limit
/// (`scope`) and client address. Instances take tokens a few at a time and spend them from memory
/// (the app's `RateLimiter`); this is the one statement that takes them.
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

    /// Takes up to `want` tokens from the bucket of `scope` and `client`, refilled at `perSecond`
    /// up to `capacity` as of `now` first (a bucket never seen is full). One statement; two
    /// instances taking from one bucket at once are ordered by its row lock.
    public func take(scope: String, client: String, want: Int, capacity: Double, perSecond: Double, now: Date) async throws -> Take {
        let row = try await executor.query(
            """
            SELECT granted, remaining FROM take_rate_limit_tokens(
              \(scope), \(client), \(Int32(clamping: want)), \(capacity), \(perSecond), \(now))
            """
        ).first
        guard let row else { throw StoreError.noRowReturned("rate_limit_buckets") }
        return Take(granted: try row.decode(Int.self, "granted"), remaining: try row.decode(Double.self, "remaining"))
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
