import Foundation
import TGPostgres
import TGStore
import TGTesting
import Testing

/// What the Shared Signals receiver keeps and drops, against a real PostgreSQL with TokenGate's schema.
@Suite struct SecurityEventStoreTests {
    @Test func aTokenIDIsRecordedOnceAndForgottenAfterItsWindow() async throws {
        try await StoreFixture.run { f in
            let events = f.store.securityEvents
            let first = try await events.record(provider: "fake", tokenID: "jti-1", until: f.now.addingTimeInterval(660))
            let again = try await events.record(provider: "fake", tokenID: "jti-1", until: f.now.addingTimeInterval(660))
            // Another provider's token may carry the same id, and a logout token's ids are apart.
            let otherProvider = try await events.record(provider: "other", tokenID: "jti-1", until: f.now.addingTimeInterval(10))
            let logoutToken = try await f.store.logoutTokens.record(provider: "fake", tokenID: "jti-1", until: f.now)
            #expect(first && !again && otherProvider && logoutToken)
            let early = try await events.deleteExpired(now: f.now.addingTimeInterval(100), limit: 10)
            let late = try await events.deleteExpired(now: f.now.addingTimeInterval(660), limit: 10)
            #expect(early == 1 && late == 1)
            #expect(try await f.count("security_event_token_ids") == 0)
        }
    }

    @Test func droppingAccessTokensDeletesOnlyThatAccountsAndKeepsItsGrant() async throws {
        try await StoreFixture.run { f in
            let alice = try await f.account("alice")
            let bob = try await f.account("bob")
            for account in [alice, bob] {
                for scope in ["a", "b"] {
                    try await f.store.accounts.storeAccessToken(
                        StoreFixture.blob("at-\(scope)"),
                        keyID: "k1",
                        account: account,
                        scopeKey: scope,
                        expiresAt: f.now.addingTimeInterval(3600),
                        issuedAt: f.now
                    )
                }
            }
            let events = f.store.securityEvents
            let dropped = try await events.dropAccessTokens(provider: "fake", issuer: "https://idp.example", subject: "alice")
            #expect(dropped?.account == alice && dropped?.dropped == 2)
            #expect(try await f.store.accounts.accessToken(bob, scopeKey: "a") != nil)
            #expect(try await f.store.accounts.accessToken(alice, scopeKey: "a") == nil)
            #expect(try await f.count("upstream_grants") == 2)
            // Another provider's or issuer's subject of the same name is nobody here.
            #expect(try await events.dropAccessTokens(provider: "other", issuer: "https://idp.example", subject: "bob") == nil)
            #expect(try await events.dropAccessTokens(provider: "fake", issuer: "https://other.example", subject: "bob") == nil)
        }
    }
}
