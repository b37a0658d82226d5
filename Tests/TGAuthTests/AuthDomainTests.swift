import Foundation
import TGAuth
import TGOIDC
import TGStore
import TGTesting
import Testing

/// The auth flow's rules, at the domain's API (no HTTP on TokenGate's side).
@Suite struct AuthDomainTests {
    @Test func aLoginGivesASessionOnANewDeviceAndASecondAccountJoinsThatDevice() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let secret = try #require(alice.deviceSecret)
            // The device's accounts are listed in the order they signed in.
            d.clock.advance(by: 1)
            let bob = try await d.logIn(as: "bob", deviceSecret: secret)
            #expect(bob.deviceSecret == nil)
            let context = try await d.auth.sessions.authenticate(accessToken: bob.accessToken)
            let accounts = try await d.auth.sessions.deviceAccounts(context)
            #expect(accounts.map(\.account.subject) == ["alice", "bob"] && accounts.map(\.isCurrent) == [false, true])
        }
    }

    @Test func aRefreshRotatesAndTheSpentTokenGetsTheSameAnswerOnlyWithinTheGrace() async throws {
        var settings = AuthSettings()
        settings.refreshReplayGrace = 10
        try await DomainFixture.run(settings: settings) { d in
            let first = try await d.logIn()
            let second = try await d.auth.grants.refresh(refreshToken: first.refreshToken, clientID: DomainFixture.app)
            #expect(second.refreshToken != first.refreshToken)
            // A retry after a lost answer, within the grace window: the same answer.
            #expect(try await d.auth.grants.refresh(refreshToken: first.refreshToken, clientID: DomainFixture.app) == second)
            d.clock.advance(by: 11)
            // Past it: reuse, and the whole family ends.
            await #expect(throws: OAuthError.self) { try await d.auth.grants.refresh(refreshToken: first.refreshToken, clientID: DomainFixture.app) }
            await #expect(throws: OAuthError.self) { try await d.auth.grants.refresh(refreshToken: second.refreshToken, clientID: DomainFixture.app) }
            await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: second.accessToken) }
        }
    }

    @Test func aHandoffCodePresentedTwiceEndsTheSessionItStarted() async throws {
        try await DomainFixture.run { d in
            let verifier = PKCE.makeVerifier()
            let code = try await d.handoffCode(verifier: verifier)
            let redemption = HandoffRedemption(
                code: code,
                codeVerifier: verifier,
                redirectURI: DomainFixture.appRedirect,
                clientID: DomainFixture.app
            )
            let tokens = try await d.auth.grants.redeemHandoff(redemption)
            await #expect(throws: OAuthError.self) { try await d.auth.grants.redeemHandoff(redemption) }
            await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: tokens.accessToken) }
            // The account went with its last session, and its grant into the revocation queue or revoked.
            #expect(try await d.store.accounts.findActive(tokens.account.id) == nil)
        }
    }

    @Test func loggingOutOneAccountLeavesTheOtherOnTheDeviceAndRevokesTheGrant() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let bob = try await d.logIn(as: "bob", deviceSecret: alice.deviceSecret)
            let result = try await d.auth.logouts.logout(accessToken: bob.accessToken, scope: .account(alice.account.id))
            #expect(result.sessionsEnded == 1 && result.accountsRemoved == 1 && result.revocations == [.revoked])
            await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: alice.accessToken) }
            #expect(try await d.auth.sessions.authenticate(accessToken: bob.accessToken).account.id == bob.account.id)
        }
    }

    @Test func theSweeperRemovesWhatExpiredAndOnlyThat() async throws {
        var settings = AuthSettings()
        settings.sessionIdleTTL = 600
        try await DomainFixture.run(settings: settings) { d in
            let old = try await d.logIn(as: "old")
            d.clock.advance(by: 400)
            let fresh = try await d.logIn(as: "fresh")
            d.clock.advance(by: 300)
            let report = try #require(try await d.auth.sweeper.sweep())
            #expect(report.sessions == 1 && report.accounts == 1)
            await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: old.accessToken) }
            #expect(try await d.store.accounts.findActive(fresh.account.id) != nil)
        }
    }
}
