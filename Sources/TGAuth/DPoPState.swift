import Foundation
import Synchronization
import TGCrypto
import TGStore

/// The proofs this instance saw lately (RFC 9449 §11.1), by key and `jti`, in bounded memory:
/// two generations, each `window` long, so a proof is remembered at least as long as its `iat`
/// is acceptable. Past `capacity` entries a new proof is refused (fail closed) rather than a
/// remembered one forgotten early.
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
    }

    enum Insertion: Equatable {
        case fresh, replayed, full
    }

    private struct Generations {
        var current: Set<Key> = []
        var previous: Set<Key> = []
        var startedAt: Date?
    }

    private let state = Mutex(Generations())
    private let window: TimeInterval
    private let capacity: Int

    init(window: TimeInterval, capacity: Int) {
        self.window = window
        self.capacity = capacity
    }

    func insert(_ key: Key, now: Date) -> Insertion {
        state.withLock { state in
            let started = state.startedAt ?? now
            if now.timeIntervalSince(started) >= 2 * window {
                state.previous = []
                state.current = []
                state.startedAt = now
            } else if now.timeIntervalSince(started) >= window {
                state.previous = state.current
                state.current = []
                state.startedAt = now
            } else if state.startedAt == nil {
                state.startedAt = now
            }
            if state.current.contains(key) || state.previous.contains(key) { return .replayed }
            guard state.current.count + state.previous.count < capacity else { return .full }
            state.current.insert(key)
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
