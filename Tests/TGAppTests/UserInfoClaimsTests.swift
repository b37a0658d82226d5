import Foundation
import TGAppTesting
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
        try await AuthFlowHarness.run(settings: Self.userInfoOnly(), providerOptions: ", userinfo: always") { h in
            // The ID token names the user one way, UserInfo another.
            h.fake.misbehave(.idTokenClaims(["name": "From The ID Token"]), grantType: "authorization_code")
            let tokens = try await h.logIn()
            #expect(h.fake.requests(to: "/userinfo").count == 1)
            let me = try await h.get("/auth/me", bearer: try #require(tokens["access_token"] as? String))
            #expect(me.json["name"] as? String == "From The ID Token")
            #expect(me.json["email"] as? String == "alice@wonderland.example")
        }
    }

    /// UserInfo about someone else (OIDC Core §5.3.2): the login fails, nothing is stored and the
    /// provider's new grant is revoked.
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
            // The grant the provider just issued is not left behind there.
            #expect(h.fake.requests(to: "/revoke").count == 1)
        }
    }

    /// UserInfo down or answering nonsense: the login still works with the ID token's claims,
    /// and the operator is told why the account has no name.
    @Test func aUserInfoOutageDoesNotFailTheLogin() async throws {
        for failure in [FakeIdentityProvider.EndpointFailure.status(503), .malformedJSON] {
            var settings = Self.userInfoOnly()
            settings.userInfoFailure = failure
            try await AuthFlowHarness.run(settings: settings) { h in
                let tokens = try await h.logIn()
                let me = try await h.get("/auth/me", bearer: try #require(tokens["access_token"] as? String))
                #expect(me.status == 200)
                #expect(me.json["email"] == nil)
                #expect(h.fake.requests(to: "/userinfo").count == 1)
                #expect(h.logs.lines.contains { $0.contains("userinfo unavailable") && $0.contains("warning") }, "\(h.logs.lines)")
            }
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
