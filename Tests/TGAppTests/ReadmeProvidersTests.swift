import Foundation
import TGTesting
import Testing

@testable import TGApp

/// The README's provider examples are a configuration TokenGate accepts.
@Suite struct ReadmeProvidersTests {
    @Test func theReadmesProviderExamplesLoadAndMapToProfiles() async throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        let start = try #require(text.range(of: "```yaml\nproviders:\n"))
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        var yaml = String(text[start.lowerBound..<end.lowerBound].dropFirst("```yaml\n".count))
        // The examples read keys from files that exist only in production; point them at a test key.
        // Entra's certificate credential: an RSA key and its certificate.
        let (certificateFile, keyFile, certificateDirectory) = try await makeRSACertificate()
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("tg-readme-\(UUID().uuidString)").path
        try "keycloak-secret\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
        defer {
            try? FileManager.default.removeItem(at: certificateDirectory)
            try? FileManager.default.removeItem(atPath: secretFile)
        }
        yaml = yaml.replacingOccurrences(of: "/etc/tokengate/entra-key.pem", with: keyFile)
            .replacingOccurrences(of: "/etc/tokengate/entra-cert.pem", with: certificateFile)
            .replacingOccurrences(of: "/run/secrets/keycloak", with: secretFile)
        let environment = ["B2C_CLIENT_SECRET", "COGNITO_CLIENT_SECRET", "GOOGLE_CLIENT_SECRET", "YAHOO_CLIENT_SECRET", "LEGACY_SECRET"]
            .reduce(into: [String: String]()) { $0[$1] = "value-of-\($1)" }
        let configuration = try ProviderConfigurationTests().load(yaml.replacingOccurrences(of: "providers:\n", with: ""), environment: environment)
        #expect(configuration.providers.map(\.kind) == [.entra, .b2c, .cognito, .google, .yahoojp, .oidc, .oauth2])
        for provider in configuration.providers {
            _ = try provider.oidcConfiguration(callbackURL: "https://gw.example/auth/callback")
        }
    }
}
