import Foundation
import TGApp
import TGPostgres
import TGTesting
import Testing

/// `authorize_parameters` may add to a provider's authorization request, never replace what the
/// protocol or TokenGate's security depends on; a configured prompt survives the app's.
@Suite struct AuthorizeParametersTests {
    func problems(_ parameters: String) throws -> [ConfigurationError.Problem] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-ap-\(UUID().uuidString).yaml").path
        try """
        database: { url: "postgresql://x@127.0.0.1/x" }
        encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
        clients: [{ client_id: app, redirect_uris: ["com.example.app:/cb"] }]
        providers:
          - { name: idp, kind: oidc, issuer: "https://idp.example", client_id: tg, client_secret: s, authorize_parameters: \(parameters) }
        """.write(toFile: path, atomically: true, encoding: .utf8)
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
        #expect(try problems("{ prompt: consent }").isEmpty)
    }

    @Test func aConfiguredConsentSurvivesAnAppsPromptLogin() async throws {
        try await AuthFlowHarness.run(providerOptions: ", authorize_parameters: { prompt: consent }") { h in
            _ = try await h.authorizationURL(AuthFlowHarness.AppLogin(), extra: [("prompt", "login")])
            let url = try await h.authorizationURL(AuthFlowHarness.AppLogin(), extra: [("prompt", "login")])
            let prompt = FakeIdentityProvider.queryParameters(of: url)["prompt"]
            #expect(prompt == "consent login")
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
