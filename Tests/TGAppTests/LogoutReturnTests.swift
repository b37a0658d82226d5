import Foundation
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

/// After the provider's logout page the browser comes back to the app, through TokenGate's
/// landing route, only to a URI the app registered.
@Suite struct LogoutReturnTests {
    static let app = "com.example.app"
    static let signedOut = "com.example.app:/signed-out"

    static func run(_ body: (AuthFlowHarness) async throws -> Void) async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.registeredPostLogoutRedirectURIs = []  // filled in once TokenGate's port is known
        try await AuthFlowHarness.run(settings: settings, postLogoutRedirectURIs: [signedOut]) { h in
            h.fake.configure { $0.registeredPostLogoutRedirectURIs = [h.baseURL + "/auth/logout/return"] }
            try await body(h)
        }
    }

    @Test func theProvidersLogoutPageSendsTheBrowserBackToTheAppWithItsState() async throws {
        try await Self.run { h in
            let tokens = try await h.logIn()
            let logout = try await h.post(
                "/auth/logout",
                form: [("post_logout_redirect_uri", Self.signedOut), ("state", "app-state-42")],
                bearer: try #require(tokens["access_token"] as? String)
            )
            #expect(logout.status == 200)
            let endSession = try #require(logout.json["end_session_url"] as? String)
            let parameters = Dictionary(uniqueKeysWithValues: (URLComponents(string: endSession)?.queryItems ?? []).map { ($0.name, $0.value ?? "") })
            #expect(parameters["post_logout_redirect_uri"] == h.baseURL + "/auth/logout/return")
            #expect(parameters["id_token_hint"] != nil)
            #expect(parameters["state"] != nil && parameters["state"] != "app-state-42", "TokenGate's own sealed state, not the app's")
            // The browser at the provider (which checks the registration) and back at TokenGate.
            let atProvider = try await curl(["-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", endSession])
            #expect(atProvider.stdout.hasPrefix("302 " + h.baseURL + "/auth/logout/return?"), "\(atProvider.stdout)")
            let landing = String(atProvider.stdout.dropFirst(4))
            let back = try await h.call(landing)
            #expect(back.status == 302)
            #expect(back.header("Location") == "\(Self.signedOut)?state=app-state-42")
        }
    }

    @Test func anUnregisteredReturnURIIsRefusedAndNothingIsLoggedOut() async throws {
        try await Self.run { h in
            let tokens = try await h.logIn()
            let access = try #require(tokens["access_token"] as? String)
            for uri in ["https://evil.example/phish", Self.signedOut + "/x", "com.example.app:/signed-out?x=1", "COM.example.app:/signed-out"] {
                let logout = try await h.post("/auth/logout", form: [("post_logout_redirect_uri", uri)], bearer: access)
                #expect(logout.status == 400, "\(uri)")
                #expect(logout.json["code"] as? String == "invalid_request")
            }
            #expect(try await h.get("/auth/me", bearer: access).status == 200)
        }
    }

    @Test func theLandingRouteRefusesAnAlteredForeignOrMissingState() async throws {
        try await Self.run { h in
            let tokens = try await h.logIn()
            let logout = try await h.post(
                "/auth/logout",
                form: [("post_logout_redirect_uri", Self.signedOut), ("state", "s")],
                bearer: try #require(tokens["access_token"] as? String)
            )
            let endSession = try #require(logout.json["end_session_url"] as? String)
            let state = try #require(URLComponents(string: endSession)?.queryItems?.first { $0.name == "state" }?.value)
            var altered = Array(state)
            altered[altered.count / 2] = altered[altered.count / 2] == "A" ? "B" : "A"
            for bad in [String(altered), "garbage", String(repeating: "A", count: 5000)] {
                let answer = try await h.get("/auth/logout/return", query: [("state", bad)])
                #expect(answer.status == 400, "\(bad.prefix(20))")
                #expect(answer.header("Location") == nil)
            }
            // No state (Cognito sends none): a page, no redirect.
            let page = try await h.get("/auth/logout/return")
            #expect(page.status == 200)
            #expect(page.header("Location") == nil)
            // Expired: the state lives as long as a pending login.
            h.clock.advance(by: 601)
            #expect(try await h.get("/auth/logout/return", query: [("state", state)]).status == 400)
        }
    }
}
