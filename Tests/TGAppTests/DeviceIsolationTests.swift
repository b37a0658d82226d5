import Foundation
import TGApp
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

/// A device is what TokenGate issued a secret for; nothing an app makes up links accounts, and
/// nobody reaches another device's accounts (docs/threat_model.md).
@Suite struct DeviceIsolationTests {
    @Test func aForgedDeviceSecretCannotJoinADevice() async throws {
        try await AuthFlowHarness.run { h in
            let owner = try await h.logIn(as: "alice")
            let login = AuthFlowHarness.AppLogin()
            let code = try await h.handoffCode(login, as: "mallory")
            let forged = try await h.post(
                "/auth/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                    ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
                    ("device_secret", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
                ]
            )
            #expect(forged.status == 400)
            #expect(forged.json["error"] as? String == "invalid_grant")
            let list = try await h.get("/auth/accounts", bearer: try #require(owner["access_token"] as? String))
            #expect((list.json["accounts"] as? [[String: Any]])?.count == 1)
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 1)
        }
    }

    @Test func anotherAppsDeviceSecretCannotJoinItsDevice() async throws {
        try await AuthFlowHarness.run { h in
            var otherLogin = AuthFlowHarness.AppLogin()
            otherLogin.clientID = AuthFlowHarness.otherClient
            otherLogin.redirectURI = AuthFlowHarness.otherRedirect
            let other = try await h.logIn(as: "alice", login: otherLogin)
            let foreignSecret = try #require(other["device_secret"] as? String)
            let login = AuthFlowHarness.AppLogin()
            let code = try await h.handoffCode(login, as: "mallory")
            let joined = try await h.post(
                "/auth/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                    ("redirect_uri", login.redirectURI), ("client_id", login.clientID), ("device_secret", foreignSecret),
                ]
            )
            #expect(joined.json["error"] as? String == "invalid_grant")
            let list = try await h.get("/auth/accounts", bearer: try #require(other["access_token"] as? String))
            #expect((list.json["accounts"] as? [[String: Any]])?.compactMap { $0["subject"] as? String } == ["alice"])
        }
    }

    @Test func anotherDeviceCanNeitherListNorClearThisDevicesAccounts() async throws {
        try await AuthFlowHarness.run { h in
            let victim = try await h.logIn(as: "alice")
            let victimAccess = try #require(victim["access_token"] as? String)
            let victimAccount = try #require((victim["account"] as? [String: Any])?["id"] as? String)
            let attacker = try await h.logIn(as: "mallory")
            let attackerAccess = try #require(attacker["access_token"] as? String)
            let list = try await h.get("/auth/accounts", bearer: attackerAccess)
            #expect((list.json["accounts"] as? [[String: Any]])?.compactMap { $0["subject"] as? String } == ["mallory"])
            let delete = try await h.delete("/auth/accounts/\(victimAccount)", bearer: attackerAccess)
            #expect(delete.status == 404)
            #expect(delete.json["code"] as? String == "account_not_found")
            let logout = try await h.post("/auth/logout", form: [("account", victimAccount)], bearer: attackerAccess)
            #expect(logout.json["sessions_ended"] as? Int == 0)
            let everywhere = try await h.post(
                "/auth/logout",
                form: [("account", victimAccount), ("everywhere", "true")],
                bearer: attackerAccess
            )
            #expect(everywhere.status == 400, "everywhere=true is only for the bearer's own account")
            #expect(try await h.get("/auth/me", bearer: victimAccess).status == 200)
            #expect(h.fake.revokedTokens.isEmpty)
        }
    }

    @Test func bearerRoutesRefuseMissingOrGarbageTokensWithAChallenge() async throws {
        try await AuthFlowHarness.run { h in
            for bearer in [nil, "garbage", String(repeating: "A", count: 43)] {
                for path in ["/auth/me", "/auth/accounts"] {
                    let result = try await h.get(path, bearer: bearer)
                    #expect(result.status == 401)
                    #expect(result.json["code"] as? String == "invalid_token")
                    #expect(result.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
                }
            }
            #expect(try await h.post("/auth/logout", form: []).status == 401)
        }
    }

    @Test func aLoginClearsTheDevicesStaleAccounts() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            let device = try #require(alice["device_secret"] as? String)
            // The provider rejected Alice's grant (what a refresh the provider refuses marks).
            try await h.database.query("UPDATE accounts SET state = 'stale', stale_reason = 'invalid_grant' WHERE subject = 'alice'")
            _ = try await h.logIn(as: "bob", deviceSecret: device)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE subject = 'alice'") == 0)
            #expect(h.fake.revokedTokens.count == 1)
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 1)
        }
    }
}

/// A device secret ends when the device is not used for `sessions.device_idle_ttl_seconds`.
@Suite struct DeviceSecretLifetimeTests {
    @Test func anIdleDeviceSecretIsRefusedAndOneInUseLivesOn() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            let secret = try #require(alice["device_secret"] as? String)
            var refresh = try #require(alice["refresh_token"] as? String)
            // In use: refreshing every 20 days for 40 days keeps the device (30-day idle lifetime).
            for _ in 0..<2 {
                h.clock.advance(by: 20 * 86400)
                refresh = try #require(try await h.refresh(refresh).json["refresh_token"] as? String)
            }
            _ = try await h.logIn(as: "bob", deviceSecret: secret)
            // Idle past the lifetime (no sweep in between): the secret is refused.
            h.clock.advance(by: 31 * 86400)
            let login = AuthFlowHarness.AppLogin()
            let code = try await h.handoffCode(login, as: "carol")
            let refused = try await h.post(
                "/auth/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                    ("redirect_uri", AuthFlowHarness.appRedirect), ("client_id", AuthFlowHarness.appClient), ("device_secret", secret),
                ]
            )
            #expect(refused.status == 400)
            #expect(refused.json["error"] as? String == "invalid_grant")
        }
    }
}
