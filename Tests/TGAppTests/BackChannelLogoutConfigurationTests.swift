import Foundation
import TGApp
import Testing

/// The back-channel logout keys: validated by `check-config`, which also prints the URI to
/// register at each provider.
@Suite struct BackChannelLogoutConfigurationTests {
    /// A configuration file with these providers (YAML flow mappings); the caller removes it.
    func configurationFile(providers: [String], server: String = "") throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-bcl-\(UUID().uuidString).yaml").path
        try """
        server: { public_base_url: "https://auth.example.com/"\(server) }
        database: { url: "postgresql://x@127.0.0.1/x" }
        providers:
        \(providers.map { "  - " + $0 }.joined(separator: "\n"))
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func load(providers: [String], server: String = "") throws -> Result<TokenGateConfiguration, ConfigurationError> {
        let path = try configurationFile(providers: providers, server: server)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return Result { () throws(ConfigurationError) in try ConfigurationLoader.load(path: path, environment: [:]) }
    }

    static let keycloak = #"{ name: keycloak, kind: oidc, issuer: "https://sso.example.com/realms/mobile", client_id: tg, client_secret: s"#
    static let legacy =
        #"{ name: legacy, kind: oauth2, client_id: tg, client_secret: s, endpoints: { authorization: "https://a.example/a", token: "https://a.example/t" }"#

    @Test func everyProviderWithIDTokensTakesLogoutTokensAtItsOwnURIUnlessTurnedOff() throws {
        let configuration = try load(providers: [
            Self.keycloak + " }", Self.legacy + " }",
            Self.keycloak.replacingOccurrences(of: "keycloak", with: "silent") + ", backchannel_logout: false }",
        ]).get()
        #expect(configuration.backChannelLogoutURIs.map(\.provider) == ["keycloak"])
        #expect(configuration.backChannelLogoutURIs.first?.uri == "https://auth.example.com/auth/backchannel-logout/keycloak")
        let keycloak = try #require(configuration.providers.first)
        #expect(keycloak.backChannelLogoutMaxAgeSeconds == 300 && !keycloak.backChannelLogoutTypedOnly)
        #expect(configuration.server.backChannelLogoutRateLimitPerMinute == 600)
    }

    @Test func checkConfigRefusesBackChannelLogoutForOAuth2AWindowOutOfRangeAndANegativeRateLimit() throws {
        let result = try load(
            providers: [
                Self.legacy + ", backchannel_logout: true }",
                Self.keycloak + ", backchannel_logout_max_age_seconds: 5, backchannel_logout_typed_only: true }",
            ],
            server: ", backchannel_logout_rate_limit_per_minute: -1"
        )
        guard case .failure(let error) = result else {
            Issue.record("the configuration was accepted")
            return
        }
        let keys = Set(error.problems.map(\.key))
        #expect(keys.contains("providers[0].backchannel_logout"), "\(error.problems)")
        #expect(keys.contains("providers[1].backchannel_logout_max_age_seconds"))
        #expect(keys.contains("server.backchannel_logout_rate_limit_per_minute"))
        let typo = try load(providers: [Self.keycloak + ", backchannel_logout_uri: x }"])
        guard case .failure(let unknown) = typo else {
            Issue.record("an unknown key was accepted")
            return
        }
        #expect(unknown.problems.map(\.key) == ["providers[0].backchannel_logout_uri"])
    }

    @Test func theCheckConfigCommandPrintsEachProvidersBackChannelLogoutURI() async throws {
        let path = try configurationFile(providers: [Self.keycloak + " }", Self.legacy + " }"])
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await TokenGateProcess.run(["check-config", "--config", path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("keycloak: backchannel_logout_uri https://auth.example.com/auth/backchannel-logout/keycloak"))
        #expect(result.stderr.contains("keycloak: redirect_uri https://auth.example.com/auth/callback"))
        #expect(result.stderr.contains("legacy: no back-channel logout"))
        // Standard output stays the configuration as JSON.
        #expect((try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) is [String: Any])
    }
}
