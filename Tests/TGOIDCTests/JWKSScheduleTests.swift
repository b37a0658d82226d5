import Foundation
import Synchronization
import TGCrypto
import TGTesting
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

    /// A token with the new `kid` that arrives while the refetch for another one runs waits for
    /// that fetch instead of being told there is no such key (and a flood of them makes one fetch).
    @Test func lookupsDuringARefetchWaitForItInsteadOfFailing() async throws {
        let provider = Provider([old.publicJWK(keyID: "old")])
        let cache = JWKSCache()
        _ = try await lookup(cache, "old", at: start, provider)
        provider.published.withLock { $0 = [old.publicJWK(keyID: "old"), new.publicJWK(keyID: "new")] }
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let started = Mutex(0)
        let later = start.addingTimeInterval(120)
        let slowLookup: @Sendable () async throws -> Int = {
            try await cache.candidates(keyID: "new", now: later, refetchInterval: .seconds(60), maxAge: .seconds(86400)) {
                () throws(OIDCError) in
                started.withLock { $0 += 1 }
                for await _ in gate { break }
                return try provider.fetch()
            }.count
        }
        let first = Task { try await slowLookup() }
        // The first lookup's fetch is under way (held at the gate); the others arrive meanwhile.
        while started.withLock({ $0 }) == 0 { await Task.yield() }
        let others = (0..<10).map { _ in Task { try await slowLookup() } }
        open.yield()
        open.finish()
        #expect(try await first.value == 1)
        for other in others { #expect(try await other.value == 1) }
        #expect(provider.fetches.withLock { $0 } == 2, "one fetch at start, one for the new kid")
    }
}

/// The schedule through a provider client, on the fake provider's clock: the first login after
/// the configured maximum age fetches the keys again.
@Suite struct JWKSMaxAgeFlowTests {
    @Test func aLoginAfterTheMaximumAgeRefetchesTheKeys() async throws {
        let fixture = try FakeProviderFixture.start(configure: { $0.jwksMaxAge = .seconds(3600) })
        _ = try await fixture.logIn()
        fixture.fake.advanceClock(by: .seconds(1800))
        _ = try await fixture.logIn()
        #expect(fixture.fake.jwksFetchCount == 1)
        // Same kid, nothing unknown: only the set's age makes the next login fetch it.
        fixture.fake.advanceClock(by: .seconds(1801))
        #expect(try await fixture.logIn().idToken?.subject == "alice")
        #expect(fixture.fake.jwksFetchCount == 2)
        await fixture.stop()
    }
}
