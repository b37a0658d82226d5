import Foundation
import TGApp
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

/// `authorize_parameters` may add to a provider's authorization request, never replace what the
/// protocol or TokenGate's security depends on; a configured prompt survives the app's.
@Suite struct AuthorizeParametersTests {
    /// A configuration file whose one provider has these `authorize_parameters`; the caller removes it.
    func configurationFile(_ parameters: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-ap-\(UUID().uuidString).yaml").path
        try """
        database: { url: "postgresql://x@127.0.0.1/x" }
        encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
        clients: [{ client_id: app, redirect_uris: ["com.example.app:/cb"] }]
        providers:
          - { name: idp, kind: oidc, issuer: "https://idp.example", client_id: tg, client_secret: s, authorize_parameters: \(parameters) }
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func problems(_ parameters: String) throws -> [ConfigurationError.Problem] {
        let path = try configurationFile(parameters)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try ConfigurationLoader.load(path: path, environment: [:])
            return []
        } catch {
            return error.problems
        }
    }

    @Test func checkConfigRejectsEveryProtocolParameterAtOnce() throws {
        let found = try problems(
            "{ state: x, NONCE: y, code_challenge: z, Code_Challenge_Method: plain, redirect_uri: 'https://evil', client_id: other, "
                + "response_type: token, scope: openid, request_uri: 'urn:x', request: jwt, response_mode: fragment, resource: ok }"
        )
        let keys = Set(found.map(\.key))
        for name in [
            "state", "NONCE", "code_challenge", "Code_Challenge_Method", "redirect_uri", "client_id", "response_type", "scope", "request_uri",
            "request", "response_mode",
        ] {
            #expect(keys.contains("providers[0].authorize_parameters.\(name)"), "\(name) not reported: \(keys)")
        }
        #expect(!keys.contains("providers[0].authorize_parameters.resource"))
    }

    @Test func checkConfigRejectsAPromptThatCannotBeRequired() throws {
        #expect(try problems("{ prompt: none }").map(\.key) == ["providers[0].authorize_parameters.prompt"])
        #expect(try problems("{ prompt: 'consent&x=1' }").map(\.key) == ["providers[0].authorize_parameters.prompt"])
        // Parameter names are case-sensitive: `Prompt` would reach the provider as an unknown
        // parameter, and the app's prompt would not be merged with it.
        #expect(try problems("{ Prompt: consent }").map(\.key) == ["providers[0].authorize_parameters.Prompt"])
        #expect(try problems("{ prompt: consent }").isEmpty)
    }

    @Test func theCheckConfigCommandExitsWith2NamingEachProtocolParameter() async throws {
        let path = try configurationFile("{ STATE: x, scope: openid, prompt: consent }")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await TokenGateProcess.run(["check-config", "--config", path])
        #expect(result.status == 2)
        #expect(result.stderr.contains("providers[0].authorize_parameters.STATE: is a protocol parameter"), "\(result.stderr)")
        #expect(result.stderr.contains("providers[0].authorize_parameters.scope: is a protocol parameter"))
        #expect(result.stderr.contains("scopes"))
        #expect(!result.stderr.contains("authorize_parameters.prompt"))
    }

    /// A provider that, like LemonLDAP::NG's offline access, issues a refresh token only to a
    /// login that asked for `prompt=consent`: without the configured prompt an app's
    /// `prompt=login` yields no refresh token (TokenGate refuses such a login); with it, the
    /// provider gets `consent login` and the login completes with a grant stored.
    @Test func aConfiguredConsentSurvivesAnAppsPromptLogin() async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.refreshTokenPrompt = "consent"
        try await AuthFlowHarness.run(settings: settings) { h in
            let login = AuthFlowHarness.AppLogin()
            let (_, parameters) = try await h.browserLogin(try await h.authorizationURL(login, extra: [("prompt", "login")]))
            #expect(parameters["error"] == "server_error", "the fake gave a refresh token without consent")
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants") == 0)
        }
        try await AuthFlowHarness.run(settings: settings, providerOptions: ", authorize_parameters: { prompt: consent }") { h in
            let login = AuthFlowHarness.AppLogin()
            let url = try await h.authorizationURL(login, extra: [("prompt", "login")])
            #expect(FakeIdentityProvider.queryParameters(of: url)["prompt"] == "consent login")
            let (_, parameters) = try await h.browserLogin(url)
            #expect(parameters["code"] != nil, "login failed: \(parameters)")
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants") == 1)
            let refused = try await h.get(
                "/auth/login",
                query: AuthFlowHarness.AppLogin().query + [("prompt", "none")],
                headers: ["Accept: application/json"]
            )
            #expect(refused.status == 400)
            #expect((refused.json["detail"] as? String ?? "").contains("consent"))
        }
    }
}
