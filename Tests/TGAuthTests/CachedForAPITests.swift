import Foundation
import TGAuth
import TGStore
import TGTesting
import Testing

/// What a proxied call takes from memory on its loop (`UpstreamTokens.cachedForAPI`): the
/// session and its account's token together, and only for an API of the account's provider.
@Suite struct CachedForAPITests {
    @Test func memoryServesTheSessionAndTokenOnlyForTheAccountsProviderAndBeforeTheRefreshIsDue() async throws {
        var settings = AuthSettings()
        // The session outlives the upstream token's refresh point (TokenGate's token 2 h, the
        // provider's 1 h).
        settings.accessTokenTTL = 7200
        try await DomainFixture.run(settings: settings) { d in
            let upstream = d.auth.upstream
            let alice = try await d.logIn()
            var presented = alice.accessToken
            let hash = try presented.withUTF8 { try UpstreamTokens.hash($0) }
            let scopes = UpstreamScopes(["User.Read"])
            #expect(upstream.cachedForAPI(hash: hash, provider: "fake", scopes: scopes) == nil)
            // The session alone in memory is not enough.
            let session = try await upstream.authenticateForAPI(accessToken: alice.accessToken)
            #expect(upstream.cachedForAPI(hash: hash, provider: "fake", scopes: scopes) == nil)
            let token = try await upstream.upstreamAccessToken(for: session, scopes: scopes.scopes)
            let served = try #require(upstream.cachedForAPI(hash: hash, provider: "fake", scopes: scopes))
            #expect(served.session === session)
            #expect(served.token == token)
            // Another provider's API gets nothing from memory (its own path answers
            // `wrong_provider`), nor do other scopes or another token.
            #expect(upstream.cachedForAPI(hash: hash, provider: "other", scopes: scopes) == nil)
            #expect(upstream.cachedForAPI(hash: hash, provider: "fake", scopes: UpstreamScopes(["Mail.Read"])) == nil)
            #expect(upstream.cachedForAPI(hash: TokenHash(Array(repeating: 1, count: 32)), provider: "fake", scopes: scopes) == nil)
            // Within the refresh margin (a minute before expiry): not served from memory.
            d.clock.advance(by: token.expiresAt.timeIntervalSince(d.clock.now) - 30)
            #expect(upstream.cachedForAPI(hash: hash, provider: "fake", scopes: scopes) == nil)
        }
    }
}
