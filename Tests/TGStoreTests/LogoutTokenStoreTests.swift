import Foundation
import TGPostgres
import TGStore
import TGTesting
import Testing

/// What back-channel logout keeps and ends, against a real PostgreSQL with TokenGate's schema.
@Suite struct LogoutTokenStoreTests {
    @Test func aTokenIDIsRecordedOnceAndForgottenAfterItsWindow() async throws {
        try await StoreFixture.run { f in
            let tokens = f.store.logoutTokens
            let first = try await tokens.record(provider: "fake", tokenID: "jti-1", until: f.now.addingTimeInterval(360))
            let again = try await tokens.record(provider: "fake", tokenID: "jti-1", until: f.now.addingTimeInterval(360))
            // Another provider's token may carry the same id.
            let otherProvider = try await tokens.record(provider: "other", tokenID: "jti-1", until: f.now.addingTimeInterval(10))
            #expect(first && !again && otherProvider)
            let early = try await tokens.deleteExpired(now: f.now.addingTimeInterval(100), limit: 10)
            let late = try await tokens.deleteExpired(now: f.now.addingTimeInterval(360), limit: 10)
            #expect(early == 1 && late == 1)
            #expect(try await f.count("logout_token_ids") == 0)
        }
    }

    @Test func twoTransactionsRecordingOneTokenIDAtOnceHaveOneWinner() async throws {
        try await StoreFixture.run { f in
            // The first holds its uncommitted row while the second tries: the second waits on the
            // unique key and, once the first commits, finds the row (a replay).
            let inserted = TestGate()
            let release = TestGate()
            let first = Task {
                try await f.store.transaction { transaction in
                    let recorded = try await transaction.logoutTokens.record(provider: "fake", tokenID: "jti-race", until: f.now)
                    inserted.open()
                    await release.wait()
                    return recorded
                }
            }
            await inserted.wait()
            let second = Task {
                try await f.store.transaction { transaction in
                    try await transaction.logoutTokens.record(provider: "fake", tokenID: "jti-race", until: f.now)
                }
            }
            // The second waits on the first's uncommitted row when the first commits.
            try await eventuallyWaiting(on: f)
            release.open()
            let outcomes = [try await first.value, try await second.value]
            #expect(outcomes == [true, false])
            #expect(try await f.count("logout_token_ids") == 1)
        }
    }

    /// Polls until some backend of the test database waits on a lock.
    private func eventuallyWaiting(on f: StoreFixture) async throws {
        for _ in 0..<2000 {
            let rows = try await f.database.query(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if try rows.first?.decode(Int.self, "n") ?? 0 > 0 { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the second transaction never waited on the first's row")
    }

    @Test func aProviderSessionEndsOnlyTheSessionsItsLoginStartedAtThatProviderAndIssuer() async throws {
        try await StoreFixture.run { f in
            let alice = try await f.account("alice")
            let bob = try await f.account("bob")
            let phone = try await f.device()
            let tablet = try await f.device()
            try await f.session(device: phone, account: alice, providerSession: "sid-a")
            try await f.session(device: tablet, account: alice, providerSession: "sid-b")
            try await f.session(device: tablet, account: bob, providerSession: "sid-a")  // bob's, at the same sid by chance
            let sessions = f.store.sessions
            // Another provider's or issuer's sid of the same value ends nothing.
            let elsewhere = ProviderLogoutTarget(provider: "other", issuer: "https://idp.example", subject: nil, sessionID: "sid-a")
            #expect(try await sessions.end(.provider(elsewhere)) == [])
            let otherIssuer = ProviderLogoutTarget(provider: "fake", issuer: "https://other.example", subject: nil, sessionID: "sid-a")
            #expect(try await sessions.end(.provider(otherIssuer)) == [])
            // With a sub, the sid is narrowed to that account.
            let aliceAtA = ProviderLogoutTarget(provider: "fake", issuer: "https://idp.example", subject: "alice", sessionID: "sid-a")
            #expect(try await sessions.end(.provider(aliceAtA)) == [alice])
            #expect(try await sessions.accounts(onDevice: tablet, now: f.now).map(\.subject).sorted() == ["alice", "bob"])
            // The sub alone: every session of the account, nobody else's.
            let allOfAlice = ProviderLogoutTarget(provider: "fake", issuer: "https://idp.example", subject: "alice", sessionID: nil)
            #expect(try await sessions.end(.provider(allOfAlice)) == [alice])
            #expect(try await sessions.accounts(onDevice: tablet, now: f.now).map(\.subject) == ["bob"])
        }
    }

    @Test func aHandoffCodeCarriesItsLoginsSidToTheSessionAndUnredeemedOnesOfThatSidBurn() async throws {
        try await StoreFixture.run { f in
            let alice = try await f.account("alice")
            let codes = f.store.loginStates
            let redeemed = StoreFixture.randomHash()
            let waiting = StoreFixture.randomHash()
            let other = StoreFixture.randomHash()
            for (hash, sid) in [(redeemed, "sid-a"), (waiting, "sid-a"), (other, "sid-b")] {
                try await codes.issueHandoff(
                    codeHash: hash,
                    account: alice,
                    clientID: "com.example.app",
                    redirectURI: "com.example.app:/cb",
                    codeChallenge: "c",
                    providerSessionID: sid,
                    now: f.now,
                    expiresAt: f.now.addingTimeInterval(60)
                )
            }
            #expect(try await codes.lockHandoff(codeHash: waiting)?.providerSessionID == "sid-a")
            let session = try await f.session(device: try await f.device(), account: alice, providerSession: "sid-a")
            try await codes.markRedeemed(codeHash: redeemed, session: session.id, now: f.now)
            let target = ProviderLogoutTarget(provider: "fake", issuer: "https://idp.example", subject: nil, sessionID: "sid-a")
            // The redeemed code stays (its replay must still end its session); the waiting one goes.
            #expect(try await codes.burnHandoffs(target) == 1)
            #expect(try await codes.lockHandoff(codeHash: waiting) == nil)
            #expect(try await codes.lockHandoff(codeHash: redeemed) != nil)
            #expect(try await codes.lockHandoff(codeHash: other) != nil)
        }
    }
}
