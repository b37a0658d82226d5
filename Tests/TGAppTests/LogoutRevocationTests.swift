import Foundation
import TGAppTesting
import TGAuth
import TGPostgres
import TGTesting
import Testing

/// Logout and the upstream refresh token: revoked at once when the provider answers, kept
/// sealed in a durable queue that a worker retries when it does not, reported honestly when the
/// provider cannot revoke at all.
@Suite struct LogoutRevocationTests {
    @Test func aLogoutRevokesAtOnceAndSaysSo() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn()
            let logout = try await h.post("/auth/logout", form: [], bearer: try #require(tokens["access_token"] as? String))
            #expect(logout.json["revoked"] as? Bool == true)
            #expect(logout.json["upstream_revocations"] as? [String] == ["revoked"])
            #expect(h.fake.revokedTokens.count == 1)
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_revocations") == 0)
        }
    }

    /// The provider is down during the logout: the grant is gone from the account tables but its
    /// refresh token waits, sealed, in the queue, and the worker revokes it once the provider is
    /// back. Nothing is left alive at the provider that nobody will revoke.
    @Test func aLogoutWhileTheProviderIsDownQueuesTheTokenUntilTheWorkerRevokesIt() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn()
            h.fake.configure { $0.revocationFailure = .status(503) }
            let logout = try await h.post("/auth/logout", form: [], bearer: try #require(tokens["access_token"] as? String))
            #expect(logout.status == 200)
            #expect(logout.json["revoked"] as? Bool == false)
            #expect(logout.json["upstream_revocations"] as? [String] == ["pending"])
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants") == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_revocations") == 1)
            // Sealed, like the grant was: the refresh token is nowhere in clear.
            let stored = try await h.database.query("SELECT encode(refresh_token, 'escape') AS t FROM upstream_revocations")
            let grantTokens = h.fake.issuedRefreshTokens
            #expect(!grantTokens.isEmpty)
            #expect(try !grantTokens.contains { token in try stored.rows.contains { try $0.decode(String.self, "t").contains(token) } })
            // Still down at the next due time: kept, later attempt.
            h.clock.advance(by: 31)
            #expect(try await h.auth.revocations.drainRevocationQueue() == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_revocations WHERE attempts = 2") == 1)
            // Back: the worker revokes it and the queue is empty.
            h.fake.configure { $0.revocationFailure = nil }
            #expect(try await h.auth.revocations.drainRevocationQueue() == 0, "not due yet: the backoff doubled")
            h.clock.advance(by: 61)
            #expect(try await h.auth.revocations.drainRevocationQueue() == 1)
            #expect(h.fake.revokedTokens.count == 3, "the logout's attempt, the failed retry, the successful one")
            #expect(grantTokens.allSatisfy { !h.fake.isRefreshTokenActive($0) })
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_revocations") == 0)
        }
    }

    /// A queued token whose provider stays down past the age limit is dropped, loudly.
    @Test func theQueueGivesUpAfterItsAgeLimitWithAnErrorLog() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn()
            h.fake.configure { $0.revocationFailure = .status(503) }
            _ = try await h.post("/auth/logout", form: [], bearer: try #require(tokens["access_token"] as? String))
            h.clock.advance(by: 8 * 86400)
            _ = try await h.auth.revocations.drainRevocationQueue()
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_revocations") == 0)
            #expect(h.logs.lines.contains { $0.contains("gave up revoking") })
        }
    }

    /// A provider without a revocation endpoint cannot end the grant: the answer says so.
    /// The member is gone before the gateway starts: its start-up discovery must not see it.
    @Test func aProviderWithoutRevocationIsReportedAsNotRevoked() async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.discoveryOverrides = ["revocation_endpoint": nil]
        try await AuthFlowHarness.run(settings: settings) { h in
            let tokens = try await h.logIn()
            let logout = try await h.post("/auth/logout", form: [], bearer: try #require(tokens["access_token"] as? String))
            #expect(logout.json["revoked"] as? Bool == false)
            #expect(logout.json["upstream_revocations"] as? [String] == ["not_supported"])
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_revocations") == 0)
        }
    }

    /// After a logout, TokenGate's old refresh tokens are simply invalid: no false "reuse" alarm.
    @Test func aRefreshTokenPresentedAfterItsLogoutIsInvalidGrantWithoutAReuseAlert() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn()
            let first = try #require(tokens["refresh_token"] as? String)
            let refreshed = try await h.refresh(first)
            let second = try #require(refreshed.json["refresh_token"] as? String)
            h.clock.advance(by: 60)  // past the replay grace
            _ = try await h.post("/auth/logout", form: [], bearer: try #require(refreshed.json["access_token"] as? String))
            for token in [first, second] {
                let answer = try await h.refresh(token)
                #expect(answer.status == 400)
                #expect(answer.json["error"] as? String == "invalid_grant")
            }
            #expect(!h.logs.lines.contains { $0.contains("reuse") })
        }
    }

    /// Two people share a phone (two accounts on one device); one logs out everywhere: only
    /// that person's sessions end, here and on their other devices.
    @Test func logoutEverywhereOnASharedPhoneEndsOnlyThatUsersSessions() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            let device = try #require(alice["device_secret"] as? String)
            let bob = try await h.logIn(as: "bob", deviceSecret: device)
            let bobsTablet = try await h.logIn(as: "bob")
            let alicesTablet = try await h.logIn(as: "alice")
            let bobAccess = try #require(bob["access_token"] as? String)
            let logout = try await h.post("/auth/logout", form: [("everywhere", "true")], bearer: bobAccess)
            #expect(logout.json["sessions_ended"] as? Int == 2)
            #expect(try await h.get("/auth/me", bearer: bobAccess).status == 401)
            #expect(try await h.get("/auth/me", bearer: try #require(bobsTablet["access_token"] as? String)).status == 401)
            #expect(try await h.get("/auth/me", bearer: try #require(alice["access_token"] as? String)).status == 200)
            #expect(try await h.get("/auth/me", bearer: try #require(alicesTablet["access_token"] as? String)).status == 200)
            // Nor can one of them end the other's sessions elsewhere by naming the account.
            let aliceAccount = try #require((alice["account"] as? [String: Any])?["id"] as? String)
            let bobAgain = try await h.logIn(as: "bob", deviceSecret: device)
            let refused = try await h.post(
                "/auth/logout",
                form: [("everywhere", "true"), ("account", aliceAccount)],
                bearer: try #require(bobAgain["access_token"] as? String)
            )
            #expect(refused.status == 400)
            #expect(try await h.get("/auth/me", bearer: try #require(alicesTablet["access_token"] as? String)).status == 200)
        }
    }
}
