public import Foundation
import TGBase
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

    /// Records many proofs in one statement; one answer per proof, in order: true when it was
    /// recorded now, false when it was recorded before (a replay, or the same key earlier in
    /// `proofs`).
    public func record(_ proofs: [(key: [UInt8], until: Date)]) async throws -> [Bool] {
        guard !proofs.isEmpty else { return [] }
        let hex = proofs.map { Hex.lowercase($0.key) }
        // `[{"k":"<hex>","e":<seconds>},…]`, written directly: hexadecimal digits and a finite
        // number need no escaping (JSONEncoder cost ~28 000 instructions a batch).
        var json = "["
        for (index, proof) in proofs.enumerated() {
            if index > 0 { json += "," }
            json += #"{"k":""# + hex[index] + #"","e":"# + String(proof.until.timeIntervalSince1970) + "}"
        }
        json += "]"
        let result = try await executor.query(
            """
            INSERT INTO dpop_proofs (proof_key, expires_at)
            SELECT decode(t.k, 'hex'), to_timestamp(t.e) FROM jsonb_to_recordset(\(json)::jsonb) AS t(k text, e double precision)
            ON CONFLICT (proof_key) DO NOTHING
            RETURNING encode(proof_key, 'hex') AS k
            """
        )
        var inserted = Set(try result.rows.map { try $0.value(String.self, "k") })
        // A key twice in one batch is inserted once: the first asker has it.
        return hex.map { inserted.remove($0) != nil }
    }

    /// Whether `error` (of a statement) means the database could not be reached.
    public static func isUnreachable(_ error: any Error) -> Bool {
        (error as? StoreError)?.kind == .unavailable
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
