import Foundation
import TGAuth
import TGBase
import TGOIDC
import TGPostgres
import TGStore
import TGTesting
import Testing

/// A redeemed transfer code presented again: only its app with its verifier counts, and within the
/// replay grace that is a retry after a lost response, not a theft.
extension TransferCodeTests {
    @Test func aRedeemedCodeWithAWrongVerifierOrAnotherAppIsRefusedAndTheMovedSessionsSurvive() async throws {
        try await DomainFixture.run { d in
            let (_, bob) = try await Self.twoAccounts(d)
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: bob, verifier: verifier)
            let moved = try await Self.redeem(d, code, verifier: verifier)
            // Within the grace and after it; more often than the failures that kill a live code.
            for advance in [1.0, 60] {
                d.clock.advance(by: advance)
                for _ in 0..<6 {
                    let wrong = await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: PKCE.makeVerifier()) }
                    #expect(wrong?.code == .invalidGrant)
                }
                let otherApp = await #expect(throws: OAuthError.self) {
                    try await Self.redeem(d, code, verifier: verifier, client: DomainFixture.otherApp)
                }
                #expect(otherApp?.code == .invalidGrant)
                for session in moved.sessions {
                    #expect(try await d.auth.sessions.authenticate(accessToken: session.accessToken).account.id == session.account.id)
                }
            }
        }
    }

    @Test func aRetryWithTheRightVerifierWithinTheGraceGetsTheSameAnswerAndTheSessionsSurvive() async throws {
        try await DomainFixture.run { d in
            let (_, bob) = try await Self.twoAccounts(d)
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: bob, verifier: verifier)
            let moved = try await Self.redeem(d, code, verifier: verifier)
            // A wrong verifier in between changes nothing either.
            await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: PKCE.makeVerifier()) }
            d.clock.advance(by: AuthSettings().refreshReplayGrace)
            let retried = try await Self.redeem(d, code, verifier: verifier)
            #expect(retried == moved)
            for session in moved.sessions {
                #expect(try await d.auth.sessions.authenticate(accessToken: session.accessToken).account.id == session.account.id)
            }
            _ = try await d.logIn(as: "carol", deviceSecret: moved.deviceSecret)
        }
    }

    @Test func twoRedemptionsRacingGetTheSameAnswer() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: alice, verifier: verifier)
            async let first = try? Self.redeem(d, code, verifier: verifier)
            async let second = try? Self.redeem(d, code, verifier: verifier)
            let results = await [first, second]
            // The row lock orders them: one redeems, the other is a retry within the grace.
            let winners = results.compactMap { $0 }
            #expect(winners.count == 2 && winners[0] == winners[1])
            for session in winners.flatMap(\.sessions) {
                #expect(try await d.auth.sessions.authenticate(accessToken: session.accessToken).account.subject == "alice")
            }
        }
    }

    @Test func aRetryWhenNothingCouldMoveGetsTheSameInteractionRequiredWithinTheGrace() async throws {
        try await DomainFixture.run { d in
            let alice = try await d.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            let code = try await Self.issue(d, with: alice, verifier: verifier)
            try await d.store.database.query("UPDATE upstream_grants SET expires_at = \(d.clock.now - 1) WHERE account_id = \(alice.account.id)")
            let first = await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: verifier) }
            #expect(first?.code == .interactionRequired)
            d.clock.advance(by: 1)
            let retried = await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: verifier) }
            #expect(retried?.code == .interactionRequired)
            #expect(retried?.members["interaction_required"] == first?.members["interaction_required"])
            d.clock.advance(by: AuthSettings().refreshReplayGrace)
            let spent = await #expect(throws: OAuthError.self) { try await Self.redeem(d, code, verifier: verifier) }
            #expect(spent?.code == .invalidGrant)
        }
    }
}
