import Foundation
import HTTPTypes
import TGApp
import TGAppTesting
import TGBase
import TGHTTPServer
import TGPostgres
import TGTesting
import Testing

/// The mobile flow: TokenGate, the fake provider, the app in-process (over real sockets with
/// curl for the first test, end to end).
@Suite struct AuthFlowTests {
    /// End to end over real sockets: the flow an app goes through, as it goes through it.
    @Test func loginTokenMeRefreshLogoutThenRefreshFails() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let login = AuthFlowHarness.AppLogin()
            // 1. The app opens /auth/login; TokenGate redirects to the provider.
            let start = try await h.get("/auth/login", query: login.query)
            #expect(start.status == 302)
            let authorize = try #require(start.header("Location"))
            #expect(authorize.hasPrefix(h.fake.authorizationEndpoint))
            #expect(start.header("Cache-Control") == "no-store")
            // 2-3. The browser logs in at the provider and comes back through the callback.
            let (location, parameters) = try await h.browserLogin(authorize)
            #expect(location.hasPrefix(AuthFlowHarness.appRedirect + "?"))
            #expect(parameters["state"] == login.state)
            #expect(parameters["iss"] == h.baseURL)
            let code = try #require(parameters["code"])
            // 4. The app redeems the handoff code with its verifier.
            let token = try await h.post(
                "/auth/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                    ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
                ]
            )
            #expect(token.status == 200)
            #expect(token.header("Cache-Control") == "no-store")
            #expect(token.header("Pragma") == "no-cache")
            let tokens = token.json
            let access = try #require(tokens["access_token"] as? String)
            let refresh = try #require(tokens["refresh_token"] as? String)
            #expect(tokens["token_type"] as? String == "Bearer")
            #expect(tokens["expires_in"] as? Int == 900)
            #expect((tokens["device_secret"] as? String)?.count == 43)
            #expect(access.count == 43 && refresh.count == 43)
            let account = try #require(tokens["account"] as? [String: Any])
            #expect(account["subject"] as? String == "alice")
            #expect(account["provider"] as? String == "fake")
            // Me.
            let me = try await h.get("/auth/me", bearer: access)
            #expect(me.status == 200)
            #expect(me.json["subject"] as? String == "alice")
            #expect(me.json["id"] as? String == account["id"] as? String)
            // Refresh rotates both tokens; the new access token works, the old one does not.
            let refreshed = try await h.refresh(refresh)
            #expect(refreshed.status == 200)
            let newAccess = try #require(refreshed.json["access_token"] as? String)
            let newRefresh = try #require(refreshed.json["refresh_token"] as? String)
            #expect(newAccess != access && newRefresh != refresh)
            #expect(refreshed.json["device_secret"] == nil)
            #expect(try await h.get("/auth/me", bearer: newAccess).status == 200)
            #expect(try await h.get("/auth/me", bearer: access).status == 401)
            // Logout ends the device's sessions, removes the account and revokes the grant upstream.
            let logout = try await h.post("/auth/logout", form: [], bearer: newAccess)
            #expect(logout.status == 200)
            #expect(logout.json["sessions_ended"] as? Int == 1)
            #expect(logout.json["accounts_removed"] as? Int == 1)
            #expect((logout.json["end_session_url"] as? String)?.hasPrefix(h.fake.endSessionEndpoint) == true)
            #expect(h.fake.revokedTokens.count == 1)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts") == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants") == 0)
            // Afterwards: refresh fails, me fails, logout again is harmless.
            let dead = try await h.refresh(newRefresh)
            #expect(dead.status == 400)
            #expect(dead.json["error"] as? String == "invalid_grant")
            #expect(try await h.get("/auth/me", bearer: newAccess).status == 401)
            let again = try await h.post("/auth/logout", form: [], bearer: newAccess)
            #expect(again.status == 200)
            #expect(again.json["sessions_ended"] as? Int == 0)
        }
    }

    @Test func loginAnswersWithJSONWhenAskedTo() async throws {
        try await AuthFlowHarness.run { h in
            let url = try await h.authorizationURL(AuthFlowHarness.AppLogin())
            #expect(url.hasPrefix(h.fake.authorizationEndpoint))
            #expect(try await h.count("SELECT count(*) AS n FROM pending_logins") == 1)
        }
    }

    @Test func logoutThenLoginAsAnotherUserShowsNothingOfTheFirst() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            let device = try #require(alice["device_secret"] as? String)
            _ = try await h.post("/auth/logout", form: [], bearer: try #require(alice["access_token"] as? String))
            let bob = try await h.logIn(as: "bob", deviceSecret: device)
            #expect(bob["device_secret"] == nil)
            let accounts = try await h.get("/auth/accounts", bearer: try #require(bob["access_token"] as? String))
            let list = try #require(accounts.json["accounts"] as? [[String: Any]])
            #expect(list.map { $0["subject"] as? String } == ["bob"])
            #expect(list.first?["current"] as? Bool == true)
            // Alice had no session elsewhere: her account and grant are gone, here and upstream.
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE subject = 'alice'") == 0)
            #expect(h.fake.revokedTokens.count == 1)
        }
    }

    @Test func aLogoutKeepsTheGrantOfAnAccountSignedInOnAnotherDevice() async throws {
        try await AuthFlowHarness.run { h in
            let phone = try await h.logIn(as: "alice")
            let tablet = try await h.logIn(as: "alice")
            _ = try await h.post("/auth/logout", form: [], bearer: try #require(phone["access_token"] as? String))
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE subject = 'alice'") == 1)
            #expect(h.fake.revokedTokens.isEmpty)
            #expect(try await h.get("/auth/me", bearer: try #require(tablet["access_token"] as? String)).status == 200)
            // everywhere=true ends the tablet's session too, and then the grant goes.
            let again = try await h.logIn(as: "alice")
            let everywhere = try await h.post(
                "/auth/logout",
                form: [("everywhere", "true")],
                bearer: try #require(again["access_token"] as? String)
            )
            #expect(everywhere.json["sessions_ended"] as? Int == 2)
            #expect(try await h.get("/auth/me", bearer: try #require(tablet["access_token"] as? String)).status == 401)
            #expect(h.fake.revokedTokens.count == 1)
        }
    }

    @Test func aDeviceHoldsSeveralAccountsAndRemovesOne() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            let device = try #require(alice["device_secret"] as? String)
            let bob = try await h.logIn(as: "bob", deviceSecret: device)
            let bobAccess = try #require(bob["access_token"] as? String)
            let list = try #require(try await h.get("/auth/accounts", bearer: bobAccess).json["accounts"] as? [[String: Any]])
            #expect(Set(list.compactMap { $0["subject"] as? String }) == ["alice", "bob"])
            let aliceID = try #require((alice["account"] as? [String: Any])?["id"] as? String)
            let removed = try await h.delete("/auth/accounts/\(aliceID)", bearer: bobAccess)
            #expect(removed.status == 204)
            #expect(try await h.get("/auth/me", bearer: try #require(alice["access_token"] as? String)).status == 401)
            let after = try #require(try await h.get("/auth/accounts", bearer: bobAccess).json["accounts"] as? [[String: Any]])
            #expect(after.compactMap { $0["subject"] as? String } == ["bob"])
            // Removing it again: not found.
            #expect(try await h.delete("/auth/accounts/\(aliceID)", bearer: bobAccess).status == 404)
        }
    }

    @Test func metadataDescribesTheAppFacingEndpoints() async throws {
        try await AuthFlowHarness.run { h in
            let result = try await h.get("/.well-known/oauth-authorization-server")
            #expect(result.status == 200)
            #expect(result.json["issuer"] as? String == h.baseURL)
            #expect(result.json["authorization_endpoint"] as? String == h.baseURL + "/auth/login")
            #expect(result.json["token_endpoint"] as? String == h.baseURL + "/auth/token")
            #expect(result.json["code_challenge_methods_supported"] as? [String] == ["S256"])
        }
    }

    @Test func theProviderMayPostTheCallback() async throws {
        try await AuthFlowHarness.run(providerOptions: ", response_mode: form_post") { h in
            let login = AuthFlowHarness.AppLogin()
            let atProvider = try await h.fake.followAuthorization(try await h.authorizationURL(login), using: h.http)
            #expect(h.fake.lastAuthorizationQuery?["response_mode"] == "form_post")
            let action = try #require(atProvider.destination)
            let result = try await h.call(action, method: .post, form: atProvider.parameters.map { ($0.key, $0.value) })
            #expect(result.status == 302)
            let parameters = FakeIdentityProvider.queryParameters(of: try #require(result.header("Location")))
            #expect(parameters["state"] == login.state)
            #expect(parameters["code"] != nil)
        }
    }

    @Test func loginOptionsReachTheProvider() async throws {
        try await AuthFlowHarness.run { h in
            let url = try await h.authorizationURL(
                AuthFlowHarness.AppLogin(),
                extra: [("prompt", "login"), ("login_hint", "carol@example.com"), ("scope", "api.read"), ("provider", "fake")]
            )
            let query = FakeIdentityProvider.queryParameters(of: url)
            #expect(query["prompt"] == "login")
            #expect(query["login_hint"] == "carol@example.com")
            #expect(query["scope"]?.split(separator: " ").contains("api.read") == true)
            // TokenGate's own state, nonce and PKCE go to the provider, never the app's.
            #expect(query["code_challenge"] != AuthFlowHarness.AppLogin().challenge)
            #expect(query["redirect_uri"] == h.baseURL + "/auth/callback")
        }
    }
}
