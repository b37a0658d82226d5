public import Foundation
import TGPostgres

/// A provider failing as a whole (`provider_faults`), as every instance sees it.
public struct ProviderFault: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// The provider refuses TokenGate's client (or its requests, without an OAuth error).
        case client
        /// The safety valve: too many distinct grants rejected at once to believe them all.
        case rejections
    }

    /// Why it is failing; nil when it is not (the row keeps the client check and last success).
    public var kind: Kind?
    public var reason: String?
    public var failingSince: Date?
    /// No refresh is tried at the provider before this.
    public var retryAt: Date?
    /// Failed attempts since ``failingSince`` (the backoff's exponent).
    public var failures: Int
    /// The valve: accounts whose grant was rejected since then come back on the next success.
    public var restoreFrom: Date?
    /// When an authenticated call last showed the client accepted.
    public var clientCheckedAt: Date?
    /// One caller of all instances is asking the provider now (until this, if it never answers).
    public var attemptUntil: Date?

    init(row: PostgresRow) throws {
        kind = try row.value(String?.self, "kind").flatMap(Kind.init(rawValue:))
        reason = try row.value(String?.self, "reason")
        failingSince = try row.value(Date?.self, "failing_since")
        retryAt = try row.value(Date?.self, "retry_at")
        failures = try row.value(Int.self, "failures")
        restoreFrom = try row.value(Date?.self, "restore_from")
        clientCheckedAt = try row.value(Date?.self, "client_checked_at")
        attemptUntil = try row.value(Date?.self, "attempt_until")
    }
}

/// Whether a caller has the attempt at a failing provider.
public enum AttemptClaim: Sendable, Equatable {
    case claimed
    /// Not this caller's: the provider's row as it is now (over meanwhile, in its backoff
    /// window, or asked by another caller), nil when it has none.
    case notClaimed(ProviderFault?)
}

/// What a provider failing as a whole looks like in the database, shared by every instance: its
/// backoff, who asks it next, the client check, and the safety valve's count of rejected grants.
public struct ProviderFaultStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    private static let columns: PostgresQuery = "kind, reason, failing_since, retry_at, failures, restore_from, client_checked_at, attempt_until"

    /// The provider's row; nil when nothing was ever recorded for it.
    public func fault(_ provider: String) async throws -> ProviderFault? {
        let rows = try await executor.query("SELECT \(fragment: Self.columns) FROM provider_faults WHERE provider = \(provider)")
        return try rows.first.map(ProviderFault.init(row:))
    }

    /// Takes the next attempt at a failing provider whose `retry_at` has come and that nobody is
    /// asking: marks it asked until `holdUntil` (if its caller never answers), so that every
    /// other caller on every instance waits for this one's answer.
    public func claimAttempt(_ provider: String, now: Date, holdUntil: Date) async throws -> AttemptClaim {
        let claimed = try await executor.query(
            """
            UPDATE provider_faults SET attempt_until = \(holdUntil)
            WHERE provider = \(provider) AND kind IS NOT NULL AND retry_at <= \(now)
              AND (attempt_until IS NULL OR attempt_until <= \(now))
            RETURNING provider
            """
        )
        if claimed.count == 1 { return .claimed }
        return .notClaimed(try await fault(provider))
    }

    /// The caller of the attempt claimed until `heldUntil` did not settle it (it did not ask, or
    /// the answer was about the grant only): the next caller may ask at once. Nothing when the
    /// attempt was settled (or taken over) meanwhile.
    public func releaseAttempt(_ provider: String, heldUntil: Date) async throws {
        try await executor.query(
            "UPDATE provider_faults SET attempt_until = NULL WHERE provider = \(provider) AND attempt_until = \(heldUntil)"
        )
    }

    /// Marks the provider failing (or keeps it so, one failure more): no refresh is tried before
    /// `now` plus `backoffBase` doubled per failure, at most `backoffMax`. `restoreFrom` (the
    /// valve) is kept once set. Returns the row as it is now.
    @discardableResult
    public func markFailing(
        _ provider: String,
        kind: ProviderFault.Kind,
        reason: String,
        restoreFrom: Date? = nil,
        now: Date,
        backoffBase: TimeInterval,
        backoffMax: TimeInterval
    ) async throws -> ProviderFault {
        let rows = try await executor.query(
            """
            INSERT INTO provider_faults AS f (provider, kind, reason, failing_since, retry_at, failures, restore_from)
            VALUES (\(provider), \(kind.rawValue), \(reason), \(now), \(now) + make_interval(secs => \(backoffBase)), 1, \(restoreFrom))
            ON CONFLICT (provider) DO UPDATE SET kind = EXCLUDED.kind, reason = EXCLUDED.reason,
              failing_since = COALESCE(f.failing_since, EXCLUDED.failing_since),
              failures = CASE WHEN f.kind IS NULL THEN 1 ELSE f.failures + 1 END,
              retry_at = \(now) + make_interval(secs => LEAST(\(backoffMax),
                \(backoffBase) * power(2, LEAST(20, CASE WHEN f.kind IS NULL THEN 0 ELSE f.failures END)))),
              restore_from = COALESCE(f.restore_from, EXCLUDED.restore_from), attempt_until = NULL
            RETURNING \(fragment: Self.columns)
            """
        )
        guard let row = rows.first else { throw StoreError.noRowReturned("provider_faults") }
        return try ProviderFault(row: row)
    }

    /// The provider answered a refresh: it is failing no more, and the valve counts afresh.
    /// Returns the fault it had, if any (the caller restores what the valve kept).
    public func recordSuccess(_ provider: String, now: Date) async throws -> ProviderFault? {
        let rows = try await executor.query(
            """
            UPDATE provider_faults AS f SET kind = NULL, reason = NULL, failing_since = NULL, retry_at = NULL, failures = 0,
              restore_from = NULL, attempt_until = NULL, last_success_at = \(now)
            FROM (SELECT \(fragment: Self.columns) FROM provider_faults WHERE provider = \(provider) FOR UPDATE) AS old
            WHERE f.provider = \(provider)
            RETURNING old.kind, old.reason, old.failing_since, old.retry_at, old.failures, old.restore_from, old.client_checked_at,
              old.attempt_until
            """
        )
        return try rows.first.map(ProviderFault.init(row:)).flatMap { $0.kind == nil ? nil : $0 }
    }

    /// An authenticated call showed the client accepted now.
    public func recordClientAccepted(_ provider: String, now: Date) async throws {
        try await executor.query(
            """
            INSERT INTO provider_faults (provider, client_checked_at) VALUES (\(provider), \(now))
            ON CONFLICT (provider) DO UPDATE SET client_checked_at = EXCLUDED.client_checked_at
            """
        )
    }

    /// Records that the provider rejected `account`'s grant, and counts the distinct grants of
    /// the provider rejected since `windowStart` with no success after them, this one included.
    /// Callers on every instance take turns (the provider's row is locked until the transaction
    /// ends), so two of them never both see one less than the valve's count.
    public func recordRejection(_ provider: String, account: UUID, now: Date, windowStart: Date) async throws -> Int {
        try await executor.query("INSERT INTO provider_faults (provider) VALUES (\(provider)) ON CONFLICT (provider) DO NOTHING")
        try await executor.query("SELECT 1 FROM provider_faults WHERE provider = \(provider) FOR UPDATE")
        try await executor.query(
            """
            INSERT INTO grant_rejections (provider, account_id, rejected_at) VALUES (\(provider), \(account), \(now))
            ON CONFLICT (provider, account_id) DO UPDATE SET rejected_at = EXCLUDED.rejected_at
            """
        )
        let rows = try await executor.query(
            """
            SELECT count(*) AS n FROM grant_rejections r JOIN provider_faults f ON f.provider = r.provider
            WHERE r.provider = \(provider) AND r.rejected_at >= \(windowStart)
              AND (f.last_success_at IS NULL OR r.rejected_at >= f.last_success_at)
            """
        )
        return try rows.first?.value(Int.self, "n") ?? 0
    }

    /// A grant refreshed now: the valve counts only rejections after the last success. Cheap
    /// when the provider has no row (nothing was ever rejected or failing).
    public func recordRefreshed(_ provider: String, now: Date) async throws {
        try await executor.query(
            "UPDATE provider_faults SET last_success_at = \(now) WHERE provider = \(provider) AND kind IS NULL"
        )
    }
}
