public import Foundation
import TGCrypto

/// Wall-clock time, injectable so expiry and rate limits are tested without sleeping.
public struct OIDCClock: Sendable {
    public var now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    public static let system = OIDCClock { Date() }
}

/// Discovery metadata per authority (B2C: per policy), reused for the configured lifetime. One
/// fetch at a time per authority; a failed refresh keeps serving the previous metadata.
actor MetadataCache {
    private struct Entry {
        var metadata: ProviderMetadata
        var fetchedAt: Date
    }

    private var entries: [String: Entry] = [:]
    private var inFlight: [String: Task<ProviderMetadata, any Error>] = [:]
    private(set) var fetchCount = 0

    func metadata(
        for url: String,
        now: Date,
        lifetime: Duration,
        fetch: @escaping @Sendable () async throws(OIDCError) -> ProviderMetadata
    ) async throws(OIDCError) -> ProviderMetadata {
        if let entry = entries[url], now.timeIntervalSince(entry.fetchedAt) < lifetime.seconds {
            return entry.metadata
        }
        let task: Task<ProviderMetadata, any Error>
        if let running = inFlight[url] {
            task = running
        } else {
            fetchCount += 1
            task = Task { try await fetch() }
            inFlight[url] = task
        }
        do {
            let metadata = try await task.value
            inFlight[url] = nil
            entries[url] = Entry(metadata: metadata, fetchedAt: now)
            return metadata
        } catch {
            inFlight[url] = nil
            if var stale = entries[url] {
                // Keep serving what worked, and ask again only after a pause, not on every request.
                stale.fetchedAt = now.addingTimeInterval(min(Self.retryPause, lifetime.seconds) - lifetime.seconds)
                entries[url] = stale
                return stale.metadata
            }
            throw error as? OIDCError ?? OIDCError(.providerUnavailable(retryAfter: nil))
        }
    }

    /// How long a failed refresh of cached metadata is not retried.
    static let retryPause: TimeInterval = 60
}

/// A provider's signing keys. An unknown `kid` refetches the set (keys rotate), at most once per
/// interval; concurrent lookups share one fetch.
actor JWKSCache {
    private var keys: JWKSet?
    private var fetchedAt: Date?
    private var inFlight: Task<JWKSet, any Error>?
    private(set) var fetchCount = 0

    /// The keys that may have signed a token with `keyID` (all keys when the token names none).
    func candidates(
        keyID: String?,
        now: Date,
        refetchInterval: Duration,
        fetch: @escaping @Sendable () async throws(OIDCError) -> JWKSet
    ) async throws(OIDCError) -> [JWK] {
        if let keys, let found = Self.match(keys, keyID), !found.isEmpty { return found }
        if let fetchedAt, now.timeIntervalSince(fetchedAt) < refetchInterval.seconds {
            return []
        }
        let task: Task<JWKSet, any Error>
        if let running = inFlight {
            task = running
        } else {
            fetchCount += 1
            task = Task { try await fetch() }
            inFlight = task
        }
        do {
            let fresh = try await task.value
            inFlight = nil
            keys = fresh
            fetchedAt = now
            return Self.match(fresh, keyID) ?? []
        } catch {
            inFlight = nil
            throw error as? OIDCError ?? OIDCError(.providerUnavailable(retryAfter: nil))
        }
    }

    private static func match(_ set: JWKSet, _ keyID: String?) -> [JWK]? {
        let signing = set.keys.filter { $0.use == nil || $0.use == "sig" }
        guard let keyID else { return signing }
        return signing.filter { $0.keyID == keyID }
    }
}

extension Duration {
    var seconds: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}
