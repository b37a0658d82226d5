import Foundation
import TGAuth
import TGBase
import TGOIDC
import TGPostgres
import TGStore
import TGTesting
import Testing

/// Re-link after a lost Keychain: transfer codes, at the domain's API.
@Suite struct TransferCodeTests {
    /// A device with alice and then bob signed in.
    static func twoAccounts(_ d: DomainFixture) async throws -> (alice: IssuedTokens, bob: IssuedTokens) {
        let alice = try await d.logIn(as: "alice")
        d.clock.advance(by: 1)
        let bob = try await d.logIn(as: "bob", deviceSecret: alice.deviceSecret)
        return (alice, bob)
    }

    static func issue(_ d: DomainFixture, with tokens: IssuedTokens, verifier: String) async throws -> IssuedTransferCode {
        let context = try await d.auth.sessions.authenticate(accessToken: tokens.accessToken)
        return try await d.auth.transfers.issueTransferCode(context, codeChallenge: PKCE.challenge(for: verifier), method: "S256")
    }

    static func redeem(
        _ d: DomainFixture,
        _ code: IssuedTransferCode,
        verifier: String,
        client: String = DomainFixture.app
    ) async throws -> TransferredDevice {
        try await d.auth.transfers.redeemTransferCode(TransferRedemption(transferCode: code.transferCode, codeVerifier: verifier, clientID: client))
    }

    @Test func aTransferCodeMovesTheDevicesAccountsToAFreshInstallWithoutAProviderLogin() async throws {
        try await DomainFixture.run { d in
            let (alice, bob) = try await Self.twoAccounts(d)
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: bob, verifier: verifier)
            #expect(code.accounts == [alice.account.id, bob.account.id].map { $0.uuidString.lowercased() })
            #expect(code.expiresIn == 30 * 86400)
            let providerRequests = d.fake.requests.count
            d.clock.advance(by: 86400)
            let moved = try await Self.redeem(d, code, verifier: verifier)
            // No provider interaction: the grants are reused.
            #expect(d.fake.requests.count == providerRequests)
            #expect(moved.sessions.map(\.account.subject) == ["alice", "bob"] && moved.interactionRequired.isEmpty)
            #expect(moved.deviceSecret != alice.deviceSecret)
            // The new sessions work and share the new device; the old device's do not.
            let context = try await d.auth.sessions.authenticate(accessToken: moved.sessions[1].accessToken)
            #expect(try await d.auth.sessions.deviceAccounts(context).map(\.account.subject) == ["alice", "bob"])
            for old in [alice, bob] {
                await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: old.accessToken) }
                await #expect(throws: OAuthError.self) {
                    try await d.auth.grants.refresh(refreshToken: old.refreshToken, clientID: DomainFixture.app)
                }
            }
            _ = try await d.auth.grants.refresh(refreshToken: moved.sessions[0].refreshToken, clientID: DomainFixture.app)
            // The new device secret adds accounts to the new device; the old one is gone.
            let carol = try await d.logIn(as: "carol", deviceSecret: moved.deviceSecret)
            #expect(try await d.auth.sessions.deviceAccounts(try await d.auth.sessions.authenticate(accessToken: carol.accessToken)).count == 3)
            await #expect(throws: OAuthError.self) { try await d.logIn(as: "dave", deviceSecret: alice.deviceSecret) }
        }
    }

    @Test func aTransferCodeWorksOnceAndASecondUseAfterTheGraceEndsWhatTheFirstCreated() async throws {
        try await DomainFixture.run { d in
            let (_, bob) = try await Self.twoAccounts(d)
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: bob, verifier: verifier)
            let moved = try await Self.redeem(d, code, verifier: verifier)
            // Past the replay grace, the right verifier again is someone holding a copy of both.
            d.clock.advance(by: AuthSettings().refreshReplayGrace + 1)
            let second = await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: verifier) }
            #expect(second?.code == .invalidGrant)
            for session in moved.sessions {
                await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: session.accessToken) }
                // Their accounts went with their last sessions (the grants to the revocation queue).
                #expect(try await d.store.accounts.findActive(session.account.id) == nil)
            }
            #expect(d.fake.revokedTokens.count == 2)
        }
    }

    @Test func aWrongVerifierOrAppIsRefusedAndFiveFailuresKillTheCode() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: alice, verifier: verifier)
            for _ in 0..<3 {
                await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: PKCE.makeVerifier()) }
            }
            // The right verifier, but another app: refused too, and counted.
            await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: verifier, client: DomainFixture.otherApp) }
            // Four failures: the code still works, and the old session is still alive until then.
            #expect(try await d.auth.sessions.authenticate(accessToken: alice.accessToken).account.id == alice.account.id)
            let moved = try await Self.redeem(d, code, verifier: verifier)
            #expect(moved.sessions.count == 1)

            let again = try await Self.issue(d, with: moved.sessions[0], verifier: verifier)
            for _ in 0..<5 {
                await #expect(throws: OAuthError.self) { try await Self.redeem(d, again, verifier: PKCE.makeVerifier()) }
            }
            let dead = await #expect(throws: OAuthError.self) { try await Self.redeem(d, again, verifier: verifier) }
            #expect(dead?.code == .invalidGrant)
            // A dead code is not a reuse: the device it was issued on keeps its session.
            #expect(try await d.auth.sessions.authenticate(accessToken: moved.sessions[0].accessToken).account.subject == "alice")
        }
    }

    @Test func anAccountWhoseGrantIsDeadOrWhoLoggedOutNeedsASignInTheOthersMove() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let bob = try await d.logIn(as: "bob", deviceSecret: alice.deviceSecret)
            let carol = try await d.logIn(as: "carol", deviceSecret: alice.deviceSecret)
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: alice, verifier: verifier)
            // Bob's grant expires at the provider; carol logs out of this device.
            try await d.store.database.query("UPDATE upstream_grants SET expires_at = \(d.clock.now - 1) WHERE account_id = \(bob.account.id)")
            _ = try await d.auth.logouts.logout(accessToken: alice.accessToken, scope: .account(carol.account.id))
            let moved = try await Self.redeem(d, code, verifier: verifier)
            #expect(moved.sessions.map(\.account.subject) == ["alice"])
            #expect(Set(moved.interactionRequired.map(\.accountID)) == [bob.account.id, carol.account.id])
            let bobEntry = try #require(moved.interactionRequired.first { $0.accountID == bob.account.id })
            #expect(bobEntry.provider == "fake")
        }
    }

    @Test func whenNoAccountCanMoveTheAnswerIsInteractionRequiredAndTheCodeIsSpent() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: alice, verifier: verifier)
            try await d.store.database.query("UPDATE upstream_grants SET expires_at = \(d.clock.now - 1) WHERE account_id = \(alice.account.id)")
            let error = await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: verifier) }
            #expect(error?.code == .interactionRequired)
            let entries = error?.members["interaction_required"]?.arrayValue
            #expect(entries?.count == 1)
            d.clock.advance(by: AuthSettings().refreshReplayGrace + 1)
            let spent = await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: verifier) }
            #expect(spent?.code == .invalidGrant)
        }
    }

    @Test func movedSessionsKeepTheirLoginsAbsoluteExpiry() async throws {
        var settings = AuthSettings()
        settings.sessionAbsoluteTTL = 1000
        try await DomainFixture.run(settings: settings) { d in
            let alice = try await d.logIn(as: "alice")
            d.clock.advance(by: 600)
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: alice, verifier: verifier)
            let moved = try await Self.redeem(d, code, verifier: verifier)
            #expect(moved.sessions[0].expiresIn <= 400)
            d.clock.advance(by: 401)
            await #expect(throws: OAuthError.self) {
                try await d.auth.grants.refresh(refreshToken: moved.sessions[0].refreshToken, clientID: DomainFixture.app)
            }
        }
    }

    @Test func aMovedSessionStillEndsWithItsProviderSession() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: alice, verifier: verifier)
            let moved = try await Self.redeem(d, code, verifier: verifier)
            let sid = try #require(d.fake.sessionIDs(of: "alice").first)
            let result = try await d.auth.logouts.backChannelLogout(provider: "fake", logoutToken: try d.fake.logoutToken(sessionID: sid))
            #expect(result.sessionsEnded == 1)
            await #expect(throws: AuthProblem.self) { try await d.auth.sessions.authenticate(accessToken: moved.sessions[0].accessToken) }
        }
    }

    @Test func aCodeExpiresAndTheSweeperRemovesIt() async throws {
        var settings = AuthSettings()
        settings.transferCodeTTL = 3600
        try await DomainFixture.run(settings: settings) { d in
            let alice = try await d.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: alice, verifier: verifier)
            d.clock.advance(by: 3601)
            let expired = await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: verifier) }
            #expect(expired?.code == .invalidGrant)
            #expect(try await d.auth.sweeper.sweep()?.transferCodes == 1)
        }
    }

    @Test func aDeviceKeepsAtMostItsLimitOfCodesAndCanRevokeThem() async throws {
        var settings = AuthSettings()
        settings.transferCodesPerDevice = 2
        try await DomainFixture.run(settings: settings) { d in
            let alice = try await d.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            var codes: [IssuedTransferCode] = []
            for _ in 0..<3 {
                codes.append(try await Self.issue(d, with: alice, verifier: verifier))
                d.clock.advance(by: 1)
            }
            // The oldest was retired by the third.
            await #expect(throws: OAuthError.self) { try await Self.redeem(d, codes[0], verifier: verifier) }
            let context = try await d.auth.sessions.authenticate(accessToken: alice.accessToken)
            #expect(try await d.auth.transfers.revokeTransferCodes(context) == 2)
            await #expect(throws: OAuthError.self) { try await Self.redeem(d, codes[2], verifier: verifier) }
            #expect(try await d.auth.sessions.authenticate(accessToken: alice.accessToken).account.subject == "alice")
        }
    }

    @Test func issuingNeedsAnS256ChallengeAndCanBeTurnedOff() async throws {
        var settings = AuthSettings()
        settings.transferCodesPerDevice = 0
        try await DomainFixture.run(settings: settings) { d in
            let alice = try await d.logIn(as: "alice")
            let context = try await d.auth.sessions.authenticate(accessToken: alice.accessToken)
            let off = await #expect(throws: AuthProblem.self) {
                try await d.auth.transfers.issueTransferCode(context, codeChallenge: PKCE.challenge(for: PKCE.makeVerifier()), method: "S256")
            }
            #expect(off?.code == .transferDisabled)
            let redeem = await #expect(throws: OAuthError.self) {
                try await d.auth.transfers.redeemTransferCode(
                    TransferRedemption(
                        transferCode: "x".padding(toLength: 43, withPad: "x", startingAt: 0),
                        codeVerifier: PKCE.makeVerifier(),
                        clientID: DomainFixture.app
                    )
                )
            }
            #expect(redeem?.code == .unsupportedGrantType)
        }
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let context = try await d.auth.sessions.authenticate(accessToken: alice.accessToken)
            for (challenge, method) in [(PKCE.makeVerifier(), "plain"), ("short", "S256"), (PKCE.challenge(for: PKCE.makeVerifier()), nil)] {
                let refused = await #expect(throws: AuthProblem.self) {
                    try await d.auth.transfers.issueTransferCode(context, codeChallenge: challenge, method: method)
                }
                #expect(refused?.code == .invalidRequest)
            }
        }
    }
}
