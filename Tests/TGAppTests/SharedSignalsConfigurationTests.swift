import Foundation
import TGApp
import Testing

/// The `shared_signals*` keys: off by default, validated by `check-config`, which also prints the
/// stream's endpoint and audience to configure at the transmitter.
@Suite struct SharedSignalsConfigurationTests {
    let files = BackChannelLogoutConfigurationTests()
    static let keycloak = BackChannelLogoutConfigurationTests.keycloak
    static let legacy = BackChannelLogoutConfigurationTests.legacy

    @Test func sharedSignalsAreOffUnlessTurnedOnAndTheAudienceDefaultsToTheClientID() throws {
        let configuration = try files.load(providers: [
            Self.keycloak + " }",
            Self.keycloak.replacingOccurrences(of: "keycloak", with: "okta") + ", shared_signals: true }",
        ]).get()
        #expect(configuration.providers.map(\.acceptsSharedSignals) == [false, true])
        let okta = configuration.providers[1]
        #expect(okta.sharedSignalsMaxAgeSeconds == 600 && okta.sharedSignalsAudience == nil)
        #expect(configuration.server.sharedSignalsRateLimitPerMinute == 600)
        #expect(configuration.providerRegistrations.contains("okta: shared signals stream endpoint_url https://auth.example.com/auth/ssf/okta"))
        #expect(configuration.providerRegistrations.contains("(delivery urn:ietf:rfc:8935, aud tg)"))
        #expect(!configuration.providerRegistrations.contains("keycloak: shared signals"))
    }

    @Test func checkConfigRefusesSharedSignalsForOAuth2StraySettingsAWindowOutOfRangeAndAMissingSecret() throws {
        let result = try files.load(
            providers: [
                Self.legacy + ", shared_signals: true }",
                Self.keycloak + ", shared_signals_audience: x }",
                Self.keycloak + ", shared_signals: true, shared_signals_max_age_seconds: 5 }",
                Self.keycloak + ", shared_signals: true, shared_signals_authorization: { env: TG_TEST_UNSET_SSF_SECRET } }",
                Self.keycloak + ", shared_signals: true, shared_signals_audience: \"\" }",
                Self.keycloak + ", shared_signals: true, shared_signals_jwks_uri: \"http://keys.example/jwks\" }",
                Self.keycloak + ", shared_signals_issuer: \"https://transmitter.example\" }",
            ],
            server: ", shared_signals_rate_limit_per_minute: -1"
        )
        guard case .failure(let error) = result else {
            Issue.record("the configuration was accepted")
            return
        }
        let keys = Set(error.problems.map(\.key))
        for key in [
            "providers[0].shared_signals", "providers[1].shared_signals_audience", "providers[2].shared_signals_max_age_seconds",
            "providers[3].shared_signals_authorization", "providers[4].shared_signals_audience", "providers[5].shared_signals_jwks_uri",
            "providers[6].shared_signals_issuer", "server.shared_signals_rate_limit_per_minute",
        ] {
            #expect(keys.contains(key), "\(key): \(error.problems)")
        }
        let typo = try files.load(providers: [Self.keycloak + ", shared_signal: true }"])
        guard case .failure(let unknown) = typo else {
            Issue.record("an unknown key was accepted")
            return
        }
        #expect(unknown.problems.map(\.key) == ["providers[0].shared_signal"])
    }

    @Test func theConfiguredAuthorizationIsRedactedWhenTheConfigurationIsPrinted() throws {
        let configuration = try files.load(providers: [
            Self.keycloak + ", shared_signals: true, shared_signals_authorization: \"Bearer push-s3cret\" }"
        ]).get()
        #expect(configuration.providers[0].sharedSignalsAuthorization?.value == "Bearer push-s3cret")
        let encoded = String(decoding: try JSONEncoder().encode(configuration), as: UTF8.self)
        #expect(!encoded.contains("push-s3cret") && encoded.contains("<redacted>"))
    }
}
