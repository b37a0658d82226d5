import Foundation
import TGBase
import TGCrypto

/// The error a fetch task ended with, as an ``OIDCError``.
func oidcError(_ error: any Error) -> OIDCError {
    error as? OIDCError ?? OIDCError(.providerUnavailable(retryAfter: nil))
}

/// Discovery metadata per authority (B2C: per policy), reused for the configured lifetime. One
/// fetch at a time per authority; a failed refresh keeps serving the previous metadata and is
/// not retried for ``retryPause``.
actor MetadataCache {
    private struct Entry {
        var metadata: ProviderMetadata
        /// When the entry stops being served without asking the provider again.
        var expires: Date
    }

    private var entries: [String: Entry] = [:]
    /// Fetches under way. A fetch records its outcome in the cache before it ends, so a caller
    /// that arrives after it never misses both the fetch and its result.
    private let fetches = SingleFlight<String, ProviderMetadata>()

    /// How long a failed refresh of cached metadata is not retried.
    static let retryPause: TimeInterval = 60

    func metadata(
        for url: String,
        now: Date,
        lifetime: Duration,
        fetch: @escaping @Sendable () async throws(OIDCError) -> ProviderMetadata
    ) async throws(OIDCError) -> ProviderMetadata {
        if let entry = entries[url], now < entry.expires { return entry.metadata }
        do {
            return try await fetches.run(url) { [self] in
                do {
                    let metadata = try await fetch()
                    await store(url, Entry(metadata: metadata, expires: now.addingTimeInterval(lifetime.timeInterval)))
                    return metadata
                } catch {
                    guard let stale = await keepServing(url, until: now.addingTimeInterval(min(Self.retryPause, lifetime.timeInterval)))
                    else { throw error }
                    return stale
                }
            }
        } catch {
            throw oidcError(error)
        }
    }

    private func store(_ url: String, _ entry: Entry) { entries[url] = entry }

    /// After a failed refresh: the previous metadata, served until `until`; nil when there is none.
    private func keepServing(_ url: String, until: Date) -> ProviderMetadata? {
        guard var stale = entries[url] else { return nil }
        stale.expires = until
        entries[url] = stale
        return stale.metadata
    }
}

/// A provider's signing keys, imported once per fetch. An unknown `kid` refetches the set (keys
/// rotate) at most once per interval, whether the previous attempt worked or not; a set older
/// than its maximum age is refetched on the next use (so a key the provider stopped publishing
/// stops being accepted), keeping the old keys when that fails. A lookup that needs the set
/// while a fetch runs waits for that fetch.
actor JWKSCache {
    /// A published key and its imported form (keys that do not import are dropped).
    struct Key: Sendable {
        var jwk: JWK
        var publicKey: PublicKey
    }

    private var keys: [Key] = []
    private var lastAttempt: Date?
    /// When `keys` were fetched.
    private var fetchedAt: Date?
    /// The fetch under way (one key). It records the keys before it ends, so a caller that
    /// arrives after it never misses both the fetch and its result.
    private let fetches = SingleFlight<Int, [Key]>()

    /// The keys that may have signed a token with `keyID` (every signing key when it names none).
    func candidates(
        keyID: String?,
        now: Date,
        refetchInterval: Duration,
        maxAge: Duration,
        fetch: @escaping @Sendable () async throws(OIDCError) -> JWKSet
    ) async throws(OIDCError) -> [PublicKey] {
        let known = Self.match(keys, keyID)
        let fresh = fetchedAt.map { now.timeIntervalSince($0) < maxAge.timeInterval } ?? false
        if !known.isEmpty, fresh { return known }
        if !fetches.isRunning(0) {
            if let lastAttempt, now.timeIntervalSince(lastAttempt) < refetchInterval.timeInterval { return known }
            lastAttempt = now
        }
        do {
            let fetched = try await fetches.run(0) { [self] in
                let keys = try await fetch().keys.filter { $0.use == nil || $0.use == "sig" }.compactMap { jwk in
                    (try? PublicKey(jwk: jwk)).map { Key(jwk: jwk, publicKey: $0) }
                }
                await store(keys, fetchedAt: now)
                return keys
            }
            return Self.match(fetched, keyID)
        } catch {
            // A scheduled refetch that failed keeps serving the keys it has.
            if !known.isEmpty { return known }
            throw oidcError(error)
        }
    }

    private func store(_ fetched: [Key], fetchedAt time: Date) {
        keys = fetched
        fetchedAt = time
    }

    private static func match(_ keys: [Key], _ keyID: String?) -> [PublicKey] {
        guard let keyID else { return keys.map(\.publicKey) }
        return keys.filter { $0.jwk.keyID == keyID }.map(\.publicKey)
    }
}
