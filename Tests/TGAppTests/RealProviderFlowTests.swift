import Foundation
import TGApp
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

/// The whole mobile flow against `oidc-provider-mock`, a real OpenID provider nobody here wrote.
/// End to end over real sockets.
@Suite struct RealProviderFlowTests {
    @Test func loginTokenMeRefreshLogoutAgainstTheRealProvider() async throws {
        let mock = try await OIDCProviderMock.start()
        defer { mock.stop() }
        try await AuthFlowHarness.run(realProvider: mock, transport: .sockets) { h in
            let login = AuthFlowHarness.AppLogin()
            let authorize = try await h.authorizationURL(login)
            #expect(authorize.hasPrefix(mock.issuer))
            // The browser step: the provider's login form, submitted as "alice".
            let atProvider = try await curl(["-i", "-X", "POST", authorize, "--data-raw", "sub=alice"])
            #expect(atProvider.status == 302)
            let callback = try #require(atProvider.header("Location"))
            #expect(callback.hasPrefix(h.baseURL + "/auth/callback?"))
            let back = try await curl(["-i", callback])
            let location = try #require(back.header("Location"), "\(back.stdout)")
            let parameters = FakeIdentityProvider.queryParameters(of: location)
            #expect(parameters["state"] == login.state)
            let code = try #require(parameters["code"], "\(parameters)")
            let token = try await h.post(
                "/auth/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                    ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
                ]
            )
            #expect(token.status == 200, "\(token.body)")
            let access = try #require(token.json["access_token"] as? String)
            let me = try await h.get("/auth/me", bearer: access)
            #expect(me.json["subject"] as? String == "alice")
            #expect(me.json["issuer"] as? String == mock.issuer)
            let refreshed = try await h.refresh(try #require(token.json["refresh_token"] as? String))
            #expect(refreshed.status == 200)
            let newAccess = try #require(refreshed.json["access_token"] as? String)
            let logout = try await h.post("/auth/logout", form: [], bearer: newAccess)
            #expect(logout.json["sessions_ended"] as? Int == 1)
            #expect(logout.json["accounts_removed"] as? Int == 1)
            #expect(try await h.refresh(try #require(refreshed.json["refresh_token"] as? String)).status == 400)
            #expect(try await h.get("/auth/me", bearer: newAccess).status == 401)
        }
    }

    /// A grant revoked at the real provider (its admin endpoint revokes every token of a user):
    /// the next upstream refresh is rejected, the account ends and the app is told to sign in.
    @Test func aGrantRevokedAtTheRealProviderEndsTheAccount() async throws {
        let mock = try await OIDCProviderMock.start()
        defer { mock.stop() }
        try await AuthFlowHarness.run(realProvider: mock, withGraphAPI: true, upstreamOptions: ", token_exchange: true", transport: .sockets) { h in
            let login = AuthFlowHarness.AppLogin()
            let authorize = try await h.authorizationURL(login)
            let atProvider = try await curl(["-i", "-X", "POST", authorize, "--data-raw", "sub=alice"])
            let callback = try #require(atProvider.header("Location"))
            let back = try await curl(["-i", callback])
            let location = try #require(back.header("Location"))
            let code = try #require(FakeIdentityProvider.queryParameters(of: location)["code"])
            let token = try await h.post(
                "/auth/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                    ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
                ]
            )
            let access = try #require(token.json["access_token"] as? String)
            let revoked = try await curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", mock.issuer + "/users/alice/revoke-tokens"])
            #expect(revoked.stdout.hasPrefix("2"), "\(revoked.stdout)")
            let exchanged = try await h.post(
                "/auth/token",
                form: [
                    ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("subject_token", access),
                    ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"), ("resource", "graph"),
                ]
            )
            #expect(exchanged.status == 400, "\(exchanged.body)")
            #expect(exchanged.json["error"] as? String == "interaction_required")
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE state = 'stale'") == 1)
            #expect(try await h.get("/auth/me", bearer: access).status == 401)
        }
    }
}
