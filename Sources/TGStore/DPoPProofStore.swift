public import Foundation
import TGPostgres

/// The DPoP proofs accepted lately (`dpop_proofs`), shared by every instance: a proof is
/// accepted once, whichever instance it reaches (docs/architecture.md, "DPoP").
public struct DPoPProofStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// Records the proof `key` (16 bytes naming the key and the `jti`) until `until`; false when
    /// it was recorded before (a replay). One insert decides, as for logout tokens: of two
    /// transactions racing with one proof, the second waits for the first and finds its row.
    public func record(_ key: [UInt8], until: Date) async throws -> Bool {
        try await executor.query(
            "INSERT INTO dpop_proofs (proof_key, expires_at) VALUES (\(PostgresBytes(key)), \(until)) ON CONFLICT (proof_key) DO NOTHING"
        ).affectedRows == 1
    }

    /// What ``record(_:until:)`` found, with the database's unavailability as an answer: the
    /// caller decides what holds then, and throws `error` to answer 503.
    public enum Recording: Sendable {
        case recorded, usedBefore
        case unreachable(any Error)
    }

    /// ``record(_:until:)``, telling an unreachable database apart from other failures.
    public func recordIfReachable(_ key: [UInt8], until: Date) async throws -> Recording {
        do {
            return try await record(key, until: until) ? .recorded : .usedBefore
        } catch let error as PostgresError where error.isUnavailable {
            return .unreachable(error)
        }
    }

    /// Forgets up to `limit` proofs past their window (they are refused as too old anyway).
    public func deleteExpired(now: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM dpop_proofs WHERE proof_key IN
              (SELECT proof_key FROM dpop_proofs WHERE expires_at <= \(now) LIMIT \(limit))
            """
        ).affectedRows
    }
}
