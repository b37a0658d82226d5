import Foundation
import TGStore
import Testing

@testable import TGAuth

/// The in-memory cache of sessions and upstream tokens stays within its capacity, index
/// included: entries that go alone (evicted, expired) take their account's index entry with them,
/// and an invalidation still finds everything that is left.
@Suite struct CredentialCacheTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func account(_ id: UUID) throws -> AccountSummary {
        let json = #"{"id": "\#(id.uuidString)", "provider": "p", "issuer": "https://issuer.example", "subject": "s"}"#
        return try JSONDecoder().decode(AccountSummary.self, from: Data(json.utf8))
    }

    static func session(_ account: UUID) throws -> SessionContext {
        SessionContext(
            sessionID: UUID(),
            deviceID: UUID(),
            clientID: "app",
            account: try Self.account(account),
            expiresAt: now.addingTimeInterval(3600),
            accessTokenExpiresAt: now.addingTimeInterval(600)
        )
    }

    static func hash(_ index: Int) -> TokenHash {
        TokenHash(Array(repeating: UInt8(truncatingIfNeeded: index), count: 24) + withUnsafeBytes(of: index) { Array($0) })
    }

    static func token(_ value: String) -> UpstreamAccessToken {
        UpstreamAccessToken(value: value, expiresAt: now.addingTimeInterval(600), scopes: ["a"], issuedAt: now)
    }

    @Test func evictedSessionsAndTokensLeaveTheAccountIndexWithinTheCapacity() throws {
        let cache = CredentialCache(capacity: 3)
        for index in 0..<50 {
            let account = UUID()
            let validUntil = Self.now.addingTimeInterval(60)
            cache.store(session: try Self.session(account), hash: Self.hash(index), validUntil: validUntil, ticket: cache.ticket())
            cache.store(token: Self.token("t\(index)"), account: account, scopeKey: "a", ticket: cache.ticket())
        }
        #expect(cache.counts.sessions == 3)
        #expect(cache.counts.tokens == 3)
        // Fifty accounts came and went: the index holds only those with an entry (at most six).
        #expect(cache.indexedAccounts <= 6)
        #expect(cache.indexedAccounts >= 3)
    }

    @Test func anExpiredSessionLeavesTheIndexWhenItIsLookedUp() throws {
        let cache = CredentialCache()
        let account = UUID()
        cache.store(session: try Self.session(account), hash: Self.hash(1), validUntil: Self.now.addingTimeInterval(60), ticket: cache.ticket())
        #expect(cache.indexedAccounts == 1)
        #expect(cache.session(Self.hash(1), now: Self.now.addingTimeInterval(61)) == nil)
        #expect(cache.indexedAccounts == 0)
    }

    /// A full cache that stores a session it already holds evicts nothing. Which entry an
    /// eviction picks is the dictionary's first, which moves with the process's hash seed: twenty
    /// pairs make a cache that evicted on a re-store lose one of them all but once in a million.
    @Test func storingAHeldSessionAgainInAFullCacheEvictsNothing() throws {
        for pair in 0..<20 {
            let cache = CredentialCache(capacity: 2)
            let first = try Self.session(UUID())
            let second = try Self.session(UUID())
            let validUntil = Self.now.addingTimeInterval(60)
            cache.store(session: first, hash: Self.hash(2 * pair), validUntil: validUntil, ticket: cache.ticket())
            cache.store(session: second, hash: Self.hash(2 * pair + 1), validUntil: validUntil, ticket: cache.ticket())
            cache.store(session: first, hash: Self.hash(2 * pair), validUntil: validUntil.addingTimeInterval(30), ticket: cache.ticket())
            #expect(cache.session(Self.hash(2 * pair), now: Self.now) != nil)
            #expect(cache.session(Self.hash(2 * pair + 1), now: Self.now) != nil)
            #expect(cache.indexedAccounts == 2)
        }
    }

    @Test func anInvalidationDropsEverythingOfItsAccountAndItsIndexOnly() throws {
        let cache = CredentialCache(capacity: 4)
        let gone = UUID()
        let kept = UUID()
        let validUntil = Self.now.addingTimeInterval(60)
        cache.store(session: try Self.session(gone), hash: Self.hash(1), validUntil: validUntil, ticket: cache.ticket())
        cache.store(token: Self.token("gone"), account: gone, scopeKey: "a", ticket: cache.ticket())
        cache.store(session: try Self.session(kept), hash: Self.hash(2), validUntil: validUntil, ticket: cache.ticket())
        cache.invalidate(accounts: [gone], now: Self.now)
        #expect(cache.session(Self.hash(1), now: Self.now) == nil)
        #expect(cache.token(account: gone, scopeKey: "a") == nil)
        #expect(cache.session(Self.hash(2), now: Self.now) != nil)
        #expect(cache.indexedAccounts == 1)
    }
}
