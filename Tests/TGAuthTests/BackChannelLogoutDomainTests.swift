import Foundation
import TGAuth
import TGOIDC
import TGStore
import TGTesting
import Testing

/// Back-channel logout (OpenID Connect Back-Channel Logout 1.0 §2.7) at the domain's API: what a
/// valid logout token from the fake provider ends, and that each is acted on once.
@Suite struct BackChannelLogoutDomainTests {
    @Test func aLogoutTokenWithASidEndsOnlyTheSessionsOfThatProviderSession() async throws {
        try await DomainFixture.run { d in
            let phone = try await d.logIn(as: "alice")
            let tablet = try await d.logIn(as: "alice")
            let sessions = d.fake.sessionIDs(of: "alice")
            #expect(sessions.count == 2)
            let result = try await d.auth.logouts.backChannelLogout(
                provider: "fake",
                logoutToken: try d.fake.logoutToken(subject: "alice", sessionID: sessions[0])
            )
            #expect(result.sessionsEnded == 1 && result.accountsRemoved == 0)
            await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: phone.accessToken) }
            #expect(try await d.auth.sessions.authenticate(accessToken: tablet.accessToken).account.subject == "alice")
            // The account is still signed in elsewhere: its grant stays, unrevoked.
            #expect(d.fake.revokedTokens.isEmpty)
            // A sid alone (no sub) ends the other one.
            let second = try await d.auth.logouts.backChannelLogout(provider: "fake", logoutToken: try d.fake.logoutToken(sessionID: sessions[1]))
            #expect(second.sessionsEnded == 1 && second.accountsRemoved == 1 && second.revocations == [.revoked])
            await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: tablet.accessToken) }
        }
    }

    @Test func aLogoutTokenWithOnlyASubEndsEverySessionOfTheAccountAndRevokesItsGrant() async throws {
        try await DomainFixture.run { d in
            let phone = try await d.logIn(as: "alice")
            let bob = try await d.logIn(as: "bob", deviceSecret: phone.deviceSecret)
            let tablet = try await d.logIn(as: "alice")
            let refreshTokens = d.fake.issuedRefreshTokens
            let result = try await d.auth.logouts.backChannelLogout(provider: "fake", logoutToken: try d.fake.logoutToken(subject: "alice"))
            #expect(result.sessionsEnded == 2 && result.accountsRemoved == 1 && result.revocations == [.revoked])
            for tokens in [phone, tablet] {
                await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: tokens.accessToken) }
            }
            // Bob, on the same phone, stays signed in.
            #expect(try await d.auth.sessions.authenticate(accessToken: bob.accessToken).account.subject == "bob")
            #expect(try await d.store.accounts.findActive(phone.account.id) == nil)
            #expect(d.fake.revokedTokens.count == 1 && refreshTokens.contains(d.fake.revokedTokens[0]))
            // A sub that has no account here is done all the same (200 at the route).
            let nobody = try await d.auth.logouts.backChannelLogout(provider: "fake", logoutToken: try d.fake.logoutToken(subject: "carol"))
            #expect(nobody.sessionsEnded == 0 && nobody.accountsRemoved == 0 && nobody.revocations.isEmpty)
        }
    }

    @Test func aLoginNotYetRedeemedWhenItsProviderSessionEndsCannotStartASession() async throws {
        try await DomainFixture.run { d in
            let verifier = PKCE.makeVerifier()
            let code = try await d.handoffCode(verifier: verifier)
            let sid = try #require(d.fake.sessionIDs(of: "alice").first)
            _ = try await d.auth.logouts.backChannelLogout(provider: "fake", logoutToken: try d.fake.logoutToken(subject: "alice", sessionID: sid))
            await #expect(throws: OAuthError.self) {
                try await d.auth.grants.redeemHandoff(
                    HandoffRedemption(code: code, codeVerifier: verifier, redirectURI: DomainFixture.appRedirect, clientID: DomainFixture.app)
                )
            }
        }
    }

    @Test func oneLogoutTokenSentToTwoInstancesAtOnceIsActedOnOnce() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let other = d.anotherInstance()
            let token = try d.fake.logoutToken(subject: "alice")
            async let first = outcome { try await d.auth.logouts.backChannelLogout(provider: "fake", logoutToken: token) }
            async let second = outcome { try await other.logouts.backChannelLogout(provider: "fake", logoutToken: token) }
            let outcomes = await [first, second]
            #expect(outcomes.filter { $0 == "done" }.count == 1)
            #expect(outcomes.filter { $0 == "invalid_request" }.count == 1)
            await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: alice.accessToken) }
            // Later, on either instance, it is a replay.
            #expect(await outcome { try await other.logouts.backChannelLogout(provider: "fake", logoutToken: token) } == "invalid_request")
        }
    }

    @Test func aTokenTheProviderDidNotSignOrForAnotherClientEndsNothing() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let forged = [
                try d.fake.logoutToken(subject: "alice", signing: .unpublishedKey()),
                try d.fake.logoutToken(subject: "alice", audience: "another-client"),
                try d.fake.logoutToken(subject: "alice", claims: ["nonce": "n"]),
            ]
            for token in forged {
                #expect(await outcome { try await d.auth.logouts.backChannelLogout(provider: "fake", logoutToken: token) } == "invalid_request")
            }
            #expect(try await d.auth.sessions.authenticate(accessToken: alice.accessToken).account.subject == "alice")
        }
    }

    /// `done`, or the OAuth error code `body` threw.
    private func outcome(_ body: () async throws -> BackChannelLogoutResult) async -> String {
        do {
            _ = try await body()
            return "done"
        } catch let error as OAuthError {
            return error.code.rawValue
        } catch {
            return "\(type(of: error))"
        }
    }
}
