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

/// One fetch at a time per key: callers that miss while a fetch runs wait for its result.
/// Used from inside an actor (which serialises the calls).
struct SingleFlight<Key: Hashable, Value: Sendable> {
    private var running: [Key: Task<Value, any Error>] = [:]

    mutating func task(for key: Key, start: @escaping @Sendable () async throws(OIDCError) -> Value) -> Task<Value, any Error> {
        if let task = running[key] { return task }
        let task = Task { try await start() }
        running[key] = task
        return task
    }

    /// Whether a fetch for `key` is under way.
    func isRunning(_ key: Key) -> Bool { running[key] != nil }

    /// Forgets `task` once it finished (not a newer one started for the same key meanwhile).
    mutating func finished(_ task: Task<Value, any Error>, for key: Key) {
        if running[key] == task { running[key] = nil }
    }
}

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
    private var fetches = SingleFlight<String, ProviderMetadata>()

    /// How long a failed refresh of cached metadata is not retried.
    static let retryPause: TimeInterval = 60

    func metadata(
        for url: String,
        now: Date,
        lifetime: Duration,
        fetch: @escaping @Sendable () async throws(OIDCError) -> ProviderMetadata
    ) async throws(OIDCError) -> ProviderMetadata {
        if let entry = entries[url], now < entry.expires { return entry.metadata }
        let task = fetches.task(for: url, start: fetch)
        do {
            let metadata = try await task.value
            fetches.finished(task, for: url)
            entries[url] = Entry(metadata: metadata, expires: now.addingTimeInterval(lifetime.seconds))
            return metadata
        } catch {
            fetches.finished(task, for: url)
            guard var stale = entries[url] else { throw oidcError(error) }
            stale.expires = now.addingTimeInterval(min(Self.retryPause, lifetime.seconds))
            entries[url] = stale
            return stale.metadata
        }
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
    private var fetches = SingleFlight<Int, [Key]>()

    /// The keys that may have signed a token with `keyID` (every signing key when it names none).
    func candidates(
        keyID: String?,
        now: Date,
        refetchInterval: Duration,
        maxAge: Duration,
        fetch: @escaping @Sendable () async throws(OIDCError) -> JWKSet
    ) async throws(OIDCError) -> [PublicKey] {
        let known = Self.match(keys, keyID)
        let fresh = fetchedAt.map { now.timeIntervalSince($0) < maxAge.seconds } ?? false
        if !known.isEmpty, fresh { return known }
        if !fetches.isRunning(0) {
            if let lastAttempt, now.timeIntervalSince(lastAttempt) < refetchInterval.seconds { return known }
            lastAttempt = now
        }
        let task = fetches.task(for: 0) { () throws(OIDCError) in
            try await fetch().keys.filter { $0.use == nil || $0.use == "sig" }.compactMap { jwk in
                (try? PublicKey(jwk: jwk)).map { Key(jwk: jwk, publicKey: $0) }
            }
        }
        do {
            keys = try await task.value
            fetches.finished(task, for: 0)
            fetchedAt = now
            return Self.match(keys, keyID)
        } catch {
            fetches.finished(task, for: 0)
            // A scheduled refetch that failed keeps serving the keys it has.
            if !known.isEmpty { return known }
            throw oidcError(error)
        }
    }

    private static func match(_ keys: [Key], _ keyID: String?) -> [PublicKey] {
        guard let keyID else { return keys.map(\.publicKey) }
        return keys.filter { $0.jwk.keyID == keyID }.map(\.publicKey)
    }
}

extension Duration {
    var seconds: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}
