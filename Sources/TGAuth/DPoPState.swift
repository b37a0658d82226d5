import Foundation
import Synchronization
import TGBase
import TGCrypto
import TGStore

/// The proofs this instance saw lately (RFC 9449 §11.1), by key and `jti`, in bounded memory:
/// two generations, each `window` long, so a proof is remembered at least as long as its `iat`
/// is acceptable. The shared record (`dpop_proofs`) decides; this one answers a replay to the
/// same instance without a statement, and stands in alone while the database is unreachable.
/// Past `capacity` entries, or past a quarter of it for one key, it records nothing more
/// (``Insertion/full``) rather than forget a remembered proof early.
final class DPoPReplayCache: Sendable {
    /// 128 bits of SHA-256(jkt, jti): collisions are out of reach, and an entry is two words.
    struct Key: Hashable {
        let high: UInt64
        let low: UInt64

        init(jkt: String, jti: String) {
            let digest = Digest.sha256(utf8: jkt + " " + jti)
            var high: UInt64 = 0
            var low: UInt64 = 0
            for index in 0..<8 {
                high = high << 8 | UInt64(digest[index])
                low = low << 8 | UInt64(digest[index + 8])
            }
            self.high = high
            self.low = low
        }

        /// The 16 bytes, big-endian, as the shared record keeps them.
        var bytes: [UInt8] {
            (0..<16).map { index in UInt8(truncatingIfNeeded: (index < 8 ? high : low) >> (8 * (7 - UInt64(index % 8)))) }
        }
    }

    enum Insertion: Equatable {
        case fresh, replayed, full
    }

    private struct Generations {
        var current: Set<Key> = []
        var previous: Set<Key> = []
        /// Entries per key thumbprint, in both generations.
        var perKey: [String: Int] = [:]
        var previousPerKey: [String: Int] = [:]
        var startedAt: Date?
    }

    private let state = Mutex(Generations())
    private let window: TimeInterval
    private let capacity: Int
    /// What one key may hold: a flood of one key's proofs leaves room for the others.
    private let perKeyCapacity: Int

    init(window: TimeInterval, capacity: Int) {
        self.window = window
        self.capacity = capacity
        perKeyCapacity = max(1, capacity / 4)
    }

    func insert(_ key: Key, jkt: String, now: Date) -> Insertion {
        state.withLock { state in
            let started = state.startedAt ?? now
            if now.timeIntervalSince(started) >= 2 * window {
                state = Generations(startedAt: now)
            } else if now.timeIntervalSince(started) >= window {
                state.previous = state.current
                state.previousPerKey = state.perKey
                state.current = []
                state.perKey = [:]
                state.startedAt = now
            } else if state.startedAt == nil {
                state.startedAt = now
            }
            if state.current.contains(key) || state.previous.contains(key) { return .replayed }
            let ofKey = state.perKey[jkt, default: 0]
            guard state.current.count + state.previous.count < capacity, ofKey + state.previousPerKey[jkt, default: 0] < perKeyCapacity
            else { return .full }
            state.current.insert(key)
            state.perKey[jkt] = ofKey + 1
            return .fresh
        }
    }
}

/// Server-issued DPoP nonces (RFC 9449 §8) that every instance accepts without sharing state:
/// the number of the current period, sealed with TokenGate's encryption keys. A nonce is handed
/// out for one period and accepted for that one and the next.
final class DPoPNonces: Sendable {
    private let vault: TokenVault
    private let lifetime: TimeInterval
    private let issued = Mutex<(period: Int64, nonce: String)?>(nil)
    private static let context = "dpop-nonce"

    init(vault: TokenVault, lifetime: TimeInterval) {
        self.vault = vault
        self.lifetime = max(lifetime, 1)
    }

    private func period(_ now: Date) -> Int64 { Int64((now.timeIntervalSince1970 / lifetime).rounded(.down)) }

    func current(now: Date) -> String {
        let period = period(now)
        if let issued = issued.withLock({ $0 }), issued.period == period { return issued.nonce }
        let sealed = (try? vault.seal(String(period), context: Self.context)).map { Base64URL.encode($0.bytes) } ?? ""
        issued.withLock { $0 = (period, sealed) }
        return sealed
    }

    func isValid(_ nonce: String, now: Date) -> Bool {
        guard nonce.utf8.count <= 512, let bytes = try? Base64URL.decode(nonce),
            let text = try? vault.open(SealedBlob(bytes), context: Self.context), let sealedPeriod = Int64(text)
        else { return false }
        let period = period(now)
        return sealedPeriod == period || sealedPeriod == period - 1
    }
}

extension DPoPBinding {
    /// Records `proof` as used, once the request it came with is otherwise authentic (its token
    /// names a session bound to the proof's key); refused when any instance accepted it before.
    /// While the database is unreachable, this instance's memory alone decides
    /// (docs/threat_model.md, "DPoP").
    public func recordProof(_ proof: DPoPProof) async throws {
        let local = verifier.replays.insert(proof.replayKey, jkt: proof.jkt, now: clock.now())
        guard local != .replayed else { throw DPoPError.usedBefore }
        // With the other proofs arriving meanwhile, in one statement.
        switch await proofRecords.submit(PendingProof(key: proof.replayKey.bytes, until: proof.acceptableUntil)) {
        case .success(true): return
        case .success(false): throw DPoPError.usedBefore
        case .failure(let error):
            // Memory that could not record it cannot vouch for it: the database's outage answers.
            guard DPoPProofStore.isUnreachable(error), local == .fresh else { throw error }
            metrics.dpopProofCheckedInMemoryOnly()
        }
    }

    /// The shared record's group commit: the proofs that arrive while one statement runs go in
    /// the next (one round trip and one commit for many calls).
    static func proofRecorder(_ store: Store) -> GroupCommit<PendingProof, Bool> {
        GroupCommit(maxBatch: 256) { proofs in
            do {
                return .success(try await store.dpopProofs.record(proofs.map { (key: $0.key, until: $0.until) }))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Records the proof of a token request in the grant's `transaction`, once the grant is
    /// found good: a refused grant records nothing, and a replayed proof rolls the grant back.
    func recordProof(_ proof: DPoPProof?, in transaction: StoreTransaction) async throws {
        guard let proof else { return }
        guard try await transaction.dpopProofs.record(proof.replayKey.bytes, until: proof.acceptableUntil) else {
            throw OAuthError(DPoPError.usedBefore)
        }
    }
}

/// A proof's replay key on its way to the shared record.
struct PendingProof: Sendable {
    let key: [UInt8]
    let until: Date
}

extension DPoPError {
    static let usedBefore = DPoPError.invalid("This DPoP proof was used before: make a new proof (a new jti) for each request.")
}
