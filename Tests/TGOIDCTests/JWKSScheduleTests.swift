import Foundation
import Synchronization
import TGCrypto
import Testing

@testable import TGOIDC

/// The JWKS is not cached forever: a key the provider stopped publishing (rotated out, perhaps
/// compromised) stops being accepted once the set is older than its maximum age; a failed refetch
/// keeps the keys it has; an unknown `kid` refetches at most once per interval. Time is injected.
@Suite struct JWKSScheduleTests {
    let old = try! PrivateKey.generate(.ec(.p256))
    let new = try! PrivateKey.generate(.ec(.p256))
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    final class Provider: Sendable {
        let published: Mutex<[JWK]>
        let failing = Mutex(false)
        let fetches = Mutex(0)
        init(_ keys: [JWK]) { published = Mutex(keys) }
        func fetch() throws(OIDCError) -> JWKSet {
            fetches.withLock { $0 += 1 }
            if failing.withLock({ $0 }) { throw OIDCError(.providerUnavailable(retryAfter: nil)) }
            return JWKSet(keys: published.withLock { $0 })
        }
    }

    func lookup(_ cache: JWKSCache, _ kid: String, at date: Date, _ provider: Provider) async throws -> Int {
        try await cache.candidates(keyID: kid, now: date, refetchInterval: .seconds(60), maxAge: .seconds(86400)) { () throws(OIDCError) in
            try provider.fetch()
        }.count
    }

    @Test func aKeyTheProviderNoLongerPublishesIsDroppedAfterTheMaximumAge() async throws {
        let provider = Provider([old.publicJWK(keyID: "old")])
        let cache = JWKSCache()
        #expect(try await lookup(cache, "old", at: start, provider) == 1)
        provider.published.withLock { $0 = [new.publicJWK(keyID: "new")] }
        // Within the maximum age the cached set is used as it is.
        #expect(try await lookup(cache, "old", at: start.addingTimeInterval(3600), provider) == 1)
        #expect(provider.fetches.withLock { $0 } == 1)
        // Past it, the next use refetches: the old key is gone, the new one there.
        #expect(try await lookup(cache, "old", at: start.addingTimeInterval(86401), provider) == 0)
        #expect(try await lookup(cache, "new", at: start.addingTimeInterval(86402), provider) == 1)
        #expect(provider.fetches.withLock { $0 } == 2)
    }

    @Test func aFailedScheduledRefetchKeepsTheKeysAndIsNotRetriedAtOnce() async throws {
        let provider = Provider([old.publicJWK(keyID: "old")])
        let cache = JWKSCache()
        #expect(try await lookup(cache, "old", at: start, provider) == 1)
        provider.failing.withLock { $0 = true }
        let later = start.addingTimeInterval(86401)
        #expect(try await lookup(cache, "old", at: later, provider) == 1)
        #expect(try await lookup(cache, "old", at: later.addingTimeInterval(1), provider) == 1)
        #expect(provider.fetches.withLock { $0 } == 2, "one attempt per interval")
    }

    @Test func unknownKeyIDsRefetchAtMostOncePerInterval() async throws {
        let provider = Provider([old.publicJWK(keyID: "old")])
        let cache = JWKSCache()
        _ = try await lookup(cache, "old", at: start, provider)
        for second in 1...50 { #expect(try await lookup(cache, "forged-\(second)", at: start.addingTimeInterval(Double(second)), provider) == 0) }
        #expect(provider.fetches.withLock { $0 } == 1, "the first fetch was at 0 s; the next is allowed only from 60 s")
        provider.published.withLock { $0 = [old.publicJWK(keyID: "old"), new.publicJWK(keyID: "new")] }
        #expect(try await lookup(cache, "new", at: start.addingTimeInterval(61), provider) == 1)
        #expect(provider.fetches.withLock { $0 } == 2)
    }
}
