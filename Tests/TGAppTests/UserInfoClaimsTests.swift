import Foundation
import TGPostgres
import TGTesting
import Testing

/// Providers that put `name` and `email` only in UserInfo (LemonLDAP::NG by default): TokenGate
/// asks UserInfo after the code exchange, checks its `sub`, and fills what the ID token lacks.
@Suite struct UserInfoClaimsTests {
    static func userInfoOnly() -> FakeIdentityProvider.Settings {
        var settings = FakeIdentityProvider.Settings()
        settings.userInfoOnlyClaims = ["name": "Alice Liddell", "email": "alice@wonderland.example"]
        return settings
    }

    @Test func claimsOnlyInUserInfoReachMe() async throws {
        try await AuthFlowHarness.run(settings: Self.userInfoOnly()) { h in
            let tokens = try await h.logIn()
            let me = try await h.get("/auth/me", bearer: try #require(tokens["access_token"] as? String))
            #expect(me.json["name"] as? String == "Alice Liddell")
            #expect(me.json["email"] as? String == "alice@wonderland.example")
            #expect(h.fake.requests(to: "/userinfo").count == 1)
        }
    }

    /// ID-token claims win; UserInfo only fills gaps.
    @Test func theIDTokensOwnClaimsWin() async throws {
        var settings = Self.userInfoOnly()
        settings.extraClaims = ["name": "From The ID Token"]
        try await AuthFlowHarness.run(settings: settings, providerOptions: ", userinfo: always") { h in
            let tokens = try await h.logIn()
            let me = try await h.get("/auth/me", bearer: try #require(tokens["access_token"] as? String))
            #expect(me.json["name"] as? String == "From The ID Token")
            #expect(me.json["email"] as? String == "alice@wonderland.example")
        }
    }

    /// UserInfo about someone else (OIDC Core §5.3.2): the login fails and nothing is stored.
    @Test func aUserInfoForAnotherSubjectFailsTheLoginAndStoresNothing() async throws {
        var settings = Self.userInfoOnly()
        settings.userInfoSubject = "mallory"
        try await AuthFlowHarness.run(settings: settings) { h in
            let login = AuthFlowHarness.AppLogin()
            let (_, parameters) = try await h.browserLogin(try await h.authorizationURL(login))
            #expect(parameters["error"] == "server_error")
            #expect(parameters["state"] == login.state)
            #expect(parameters["code"] == nil)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts") == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants") == 0)
        }
    }

    /// UserInfo down: the login still works with the ID token's claims.
    @Test func aUserInfoOutageDoesNotFailTheLogin() async throws {
        var settings = Self.userInfoOnly()
        settings.userInfoFailure = .status(503)
        try await AuthFlowHarness.run(settings: settings) { h in
            let tokens = try await h.logIn()
            let me = try await h.get("/auth/me", bearer: try #require(tokens["access_token"] as? String))
            #expect(me.status == 200)
            #expect(me.json["email"] == nil)
        }
    }

    /// `userinfo: never`, or an ID token that already names the user: UserInfo is not asked.
    @Test func userInfoIsNotAskedWhenNotNeededOrTurnedOff() async throws {
        try await AuthFlowHarness.run(settings: Self.userInfoOnly(), providerOptions: ", userinfo: never") { h in
            _ = try await h.logIn()
            #expect(h.fake.requests(to: "/userinfo").isEmpty)
        }
        var settings = Self.userInfoOnly()
        settings.extraClaims = ["email": "alice@idtoken.example"]
        try await AuthFlowHarness.run(settings: settings) { h in
            _ = try await h.logIn()
            #expect(h.fake.requests(to: "/userinfo").isEmpty)
        }
    }
}
