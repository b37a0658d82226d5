import Foundation
import TGApp
import TGAppTesting
import TGAuth
import TGPostgres
import TGTesting
import Testing

/// The sweeper removes what is stale, everywhere, one instance at a time.
@Suite struct SweeperTests {
    @Test func removesExpiredLoginsCodesAndSessionsAndTheirAccounts() async throws {
        try await AuthFlowHarness.run { h in
            _ = try await h.authorizationURL(AuthFlowHarness.AppLogin())  // abandoned at the provider
            _ = try await h.handoffCode(AuthFlowHarness.AppLogin(), as: "carol")  // never redeemed
            let kept = try await h.logIn(as: "alice")
            _ = try await h.logIn(as: "bob")
            h.clock.advance(by: 3600)
            // Alice keeps refreshing; Bob's session idles out.
            var refresh = try #require(kept["refresh_token"] as? String)
            for _ in 0..<31 {
                h.clock.advance(by: 86400)
                refresh = try #require(try await h.refresh(refresh).json["refresh_token"] as? String)
            }
            let report = try #require(try await h.auth.sweeper.sweep())
            #expect(report.pendingLogins == 1)
            #expect(report.handoffCodes >= 1)
            #expect(report.sessions == 1)
            #expect(report.accounts == 2)  // bob (idle) and carol (never redeemed)
            #expect(report.upstreamRevocations == 2)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts") == 1)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE subject = 'alice'") == 1)
            #expect(h.logs.lines.contains { $0.contains("\"sweep\"") || $0.contains("sweep") })
            // Nothing left to do: a second sweep removes nothing.
            let again = try #require(try await h.auth.sweeper.sweep())
            #expect(again == SweepReport())
        }
    }

    @Test func removesAccountsTheProviderRejected() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn(as: "alice")
            try await h.database.query("UPDATE accounts SET state = 'stale', stale_reason = 'invalid_grant'")
            let report = try #require(try await h.auth.sweeper.sweep())
            #expect(report.accounts == 1)
            #expect(try await h.get("/auth/me", bearer: try #require(tokens["access_token"] as? String)).status == 401)
        }
    }

    @Test func onlyOneSweeperRunsAtATime() async throws {
        try await AuthFlowHarness.run { h in
            try await h.database.withConnection { holder in
                try await holder.query("SELECT pg_advisory_lock(\(Int64(0x546F_6B47_5377_6570)))")
                #expect(try await h.auth.sweeper.sweep() == nil)
                try await holder.query("SELECT pg_advisory_unlock(\(Int64(0x546F_6B47_5377_6570)))")
            }
            #expect(try await h.auth.sweeper.sweep() != nil)
        }
    }

    @Test func aFreshUnredeemedLoginSurvivesTheSweep() async throws {
        try await AuthFlowHarness.run { h in
            let login = AuthFlowHarness.AppLogin()
            let code = try await h.handoffCode(login)
            _ = try await h.auth.sweeper.sweep()
            let tokens = try await h.post(
                "/auth/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                    ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
                ]
            )
            #expect(tokens.status == 200)
        }
    }
}

/// A sweep that fails or is cancelled half-way must not keep the one-sweeper lock on a pooled
/// connection (no instance could sweep again until that connection closed).
@Suite struct SweeperLockTests {
    /// Advisory locks held in this test's database (not in another test's, still closing).
    static let advisoryLocksHere: PostgresQuery =
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"

    @Test func aCancelledSweepLeavesTheSweeperLockFree() async throws {
        try await AuthFlowHarness.run { h in
            let blocker = PostgresClient(configuration: .init(url: h.databaseURL))
            defer { blocker.shutdown() }
            let sweep: Task<SweepReport?, any Error> = try await blocker.withTransaction { connection in
                // The sweep takes its lock, then waits on this table lock.
                try await connection.query("LOCK TABLE pending_logins IN ACCESS EXCLUSIVE MODE")
                let sweep = Task { try await h.auth.sweeper.sweep() }
                while try await h.count(Self.advisoryLocksHere) == 0 {
                    try await Task.sleep(for: .milliseconds(5))
                }
                sweep.cancel()
                return sweep
            }
            _ = await sweep.result
            #expect(try await h.count(Self.advisoryLocksHere) == 0)
            #expect(try await h.auth.sweeper.sweep() != nil, "another sweep must be able to run")
        }
    }
}
