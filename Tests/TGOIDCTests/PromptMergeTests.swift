import Foundation
import TGTesting
import Testing

@testable import TGOIDC

/// The prompt values a provider needs for a long-lived refresh token (Google's `consent`, or a
/// configured `authorize_parameters.prompt` such as LemonLDAP::NG's offline access) stay when an
/// app asks for its own; the app may add values, never remove them.
@Suite struct PromptMergeTests {
    static let metadata = ProviderProfileTests.metadata

    func prompt(_ provider: OpenIDProvider, app: String?) async throws -> String? {
        let request = try await provider.authorizationRequest(AuthorizationOptions(prompt: app))
        return ProviderProfileTests().query(request.url)["prompt"]
    }

    @Test func aConfiguredPromptStaysWhenTheAppAddsItsOwn() async throws {
        let provider = testProvider(.oauth2(Self.metadata)) { $0.extraAuthorizationParameters = [("prompt", "consent")] }
        #expect(try await prompt(provider, app: nil) == "consent")
        #expect(try await prompt(provider, app: "login") == "consent login")
        #expect(try await prompt(provider, app: "consent") == "consent")
        #expect(try await prompt(provider, app: "select_account login") == "consent select_account login")
    }

    @Test func googlesConsentStaysWhenTheAppAsksForALogin() throws {
        let provider = testProvider(.google())
        #expect(try provider.mergedPrompt(app: "login") == "consent login")
        #expect(try provider.mergedPrompt(app: nil) == "consent")
    }

    /// Against a provider that gives a refresh token only to logins that asked for consent: the
    /// app's `prompt=login` alone gets none, with the configured `consent` it does.
    @Test func theConfiguredConsentGetsTheRefreshTokenWhenTheAppAsksForALogin() async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.refreshTokenPrompt = "consent"
        let plain = try FakeProviderFixture.start(settings: settings)
        #expect(try await plain.logIn(AuthorizationOptions(prompt: "login")).tokens.refreshToken == nil)
        await plain.stop()
        let configured = try FakeProviderFixture.start(settings: settings, configure: { $0.extraAuthorizationParameters = [("prompt", "consent")] })
        #expect(try await configured.logIn(AuthorizationOptions(prompt: "login")).tokens.refreshToken != nil)
        #expect(configured.fake.lastAuthorizationQuery?["prompt"] == "consent login")
        await configured.stop()
    }

    /// `none` cannot be combined with other values (OIDC Core §3.1.2.1): with a required value it is
    /// refused, saying why, rather than silently dropping what the provider needs.
    @Test func promptNoneWithARequiredValueIsRefusedWithAReason() async throws {
        let required = [
            testProvider(.google()), testProvider(.oauth2(Self.metadata)) { $0.extraAuthorizationParameters = [("prompt", "consent")] },
        ]
        for provider in required {
            let error = #expect(throws: OIDCError.self) { _ = try provider.mergedPrompt(app: "none") }
            #expect(error?.description.contains("consent") == true, "\(String(describing: error))")
        }
        // Without a required value, none alone passes; none with another value never does.
        let plain = testProvider(.oauth2(Self.metadata))
        #expect(try await prompt(plain, app: "none") == "none")
        await #expect(throws: OIDCError.self) { _ = try await prompt(plain, app: "none login") }
    }
}
