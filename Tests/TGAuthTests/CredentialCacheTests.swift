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

    @Test func anAccountKeepsItsIndexWhileItHasAnEntryAndAnInvalidationDropsWhatIsLeft() throws {
        let cache = CredentialCache(capacity: 2)
        let kept = UUID()
        let context = try Self.session(kept)
        cache.store(session: context, hash: Self.hash(1), validUntil: Self.now.addingTimeInterval(60), ticket: cache.ticket())
        cache.store(token: Self.token("kept"), account: kept, scopeKey: "a", ticket: cache.ticket())
        // Storing the same session again evicts nothing (it is not a new entry).
        cache.store(session: context, hash: Self.hash(1), validUntil: Self.now.addingTimeInterval(90), ticket: cache.ticket())
        cache.store(session: try Self.session(UUID()), hash: Self.hash(2), validUntil: Self.now.addingTimeInterval(60), ticket: cache.ticket())
        #expect(cache.counts.sessions == 2)
        #expect(cache.session(Self.hash(1), now: Self.now) != nil)
        cache.invalidate(accounts: [kept], now: Self.now)
        #expect(cache.session(Self.hash(1), now: Self.now) == nil)
        #expect(cache.token(account: kept, scopeKey: "a") == nil)
        #expect(cache.indexedAccounts == 1)
    }
}
