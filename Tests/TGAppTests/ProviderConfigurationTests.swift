import Foundation
import TGCrypto
import TGHTTPClient
import TGOIDC
import TGTesting
import Testing

@testable import TGApp

/// Providers in the configuration file: every kind's required settings are checked at once, and a
/// valid entry becomes the OIDC client's profile with its quirks.
@Suite struct ProviderConfigurationTests {
    func load(_ providers: String, environment: [String: String] = [:]) throws -> TokenGateConfiguration {
        let text = """
            database: { url: "postgresql://127.0.0.1/x" }
            encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
            providers:
            \(providers)
            """
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-providers-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try ConfigurationLoader.load(path: path, environment: environment)
    }

    /// A PEM private key for `private_key_jwt` examples.
    static func pemKey() throws -> String {
        try PrivateKey.generate(.ec(.p256)).pemRepresentation
    }

    func problems(_ providers: String) -> [String] {
        do {
            _ = try load(providers)
            return []
        } catch let error as ConfigurationError {
            return error.problems.map { "\($0.key): \($0.message)" }
        } catch {
            return ["\(error)"]
        }
    }

    @Test func listsEveryMissingKindSpecificSettingAtOnce() {
        let found = problems(
            """
              - { name: corp, kind: entra, client_id: a, client_secret: s }
              - { name: shop, kind: b2c, client_id: b, client_secret: s }
              - { name: pool, kind: cognito, client_id: c, client_secret: s }
              - { name: legacy, kind: oauth2, client_id: d, client_secret: s }
              - { name: signed, kind: oidc, issuer: "https://idp.example", client_id: e, auth_method: private_key_jwt, private_key: "not a key" }
            """
        )
        let keys = Set(found.map { String($0.prefix { $0 != ":" }) })
        for key in [
            "providers[0].tenant", "providers[1].tenant", "providers[1].authority", "providers[1].policies",
            "providers[2].issuer", "providers[2].authority", "providers[3].endpoints",
            "providers[4].private_key_id", "providers[4].private_key",
        ] {
            #expect(keys.contains(key), "missing problem for \(key) in \(found)")
        }
    }

    @Test func refusesSettingsThatBelongToAnotherKind() {
        let found = problems(
            """
              - { name: g, kind: google, client_id: a, client_secret: s, policies: [B2C_1_x], allowed_tenants: [t] }
            """
        )
        #expect(found.contains { $0.hasPrefix("providers[0].policies") })
        #expect(found.contains { $0.hasPrefix("providers[0].allowed_tenants") })
    }

    @Test func buildsEachKindsProfileWithTheRealDefaults() throws {
        let configuration = try load(
            """
              - { name: corp, kind: entra, tenant: organizations, allowed_tenants: [72F988BF-86F1-41AF-91AB-2D7CD011DB47], client_id: a, client_secret: s }
              - { name: shop, kind: b2c, tenant: contoso.onmicrosoft.com, authority: "https://contoso.b2clogin.com", policies: [B2C_1_signin, B2C_1_edit], client_id: b, client_secret: s, auth_method: client_secret_post }
              - { name: pool, kind: cognito, issuer: "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc", authority: "https://shop.auth.eu-west-1.amazoncognito.com", client_id: c, client_secret: s }
              - { name: google, kind: google, client_id: d, client_secret: s, response_mode: form_post }
              - { name: yahoo, kind: yahoojp, client_id: e, client_secret: s, authorize_parameters: { bail: "1" } }
            """
        )
        let built = try configuration.providers.map { try $0.oidcConfiguration(callbackURL: "https://gw.example/auth/callback") }
        #expect(
            built[0].profile
                == .entra(
                    tenant: "organizations",
                    authority: "https://login.microsoftonline.com",
                    allowedTenants: ["72f988bf-86f1-41af-91ab-2d7cd011db47"]
                )
        )
        #expect(
            built[1].profile
                == .azureADB2C(
                    host: "https://contoso.b2clogin.com",
                    tenantDomain: "contoso.onmicrosoft.com",
                    policies: ["B2C_1_signin", "B2C_1_edit"]
                )
        )
        #expect(built[1].clientAuthentication.description == "client_secret_post")
        #expect(
            built[2].profile
                == .cognito(
                    issuer: "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc",
                    domain: "https://shop.auth.eu-west-1.amazoncognito.com"
                )
        )
        #expect(built[3].profile == .google(issuer: "https://accounts.google.com"))
        #expect(built[3].responseMode == .formPost)
        #expect(built[4].profile == .yahooJapan(issuer: "https://auth.login.yahoo.co.jp/yconnect/v2"))
        #expect(built[4].extraAuthorizationParameters.map(\.name) == ["bail"])
        #expect(built.allSatisfy { $0.redirectURI == "https://gw.example/auth/callback" })
    }

    /// How long a JWKS is used before it is fetched again: a day unless configured.
    @Test func takesTheKeySetsMaximumAgeFromTheConfiguration() throws {
        let configuration = try load(
            """
              - { name: a, kind: oidc, issuer: "https://a.example", client_id: a, client_secret: s }
              - { name: b, kind: oidc, issuer: "https://b.example", client_id: b, client_secret: s, jwks_max_age_seconds: 3600 }
            """
        )
        let built = try configuration.providers.map { try $0.oidcConfiguration(callbackURL: "https://gw.example/auth/callback") }
        #expect(built.map(\.jwksMaxAge) == [.seconds(86400), .seconds(3600)])
        let found = problems(
            """
              - { name: a, kind: oidc, issuer: "https://a.example", client_id: a, client_secret: s, jwks_max_age_seconds: 59 }
              - { name: b, kind: oidc, issuer: "https://b.example", client_id: b, client_secret: s, jwks_max_age_seconds: 604801 }
            """
        )
        #expect(found.map { String($0.prefix { $0 != ":" }) } == ["providers[0].jwks_max_age_seconds", "providers[1].jwks_max_age_seconds"])
    }

    @Test func loadsAPrivateKeyJWTKeyFromTheEnvironmentAndPicksItsAlgorithm() throws {
        let key = try PrivateKey.generate(.ec(.p256))
        let configuration = try load(
            """
              - { name: corp, kind: oidc, issuer: "https://idp.example", client_id: a, auth_method: private_key_jwt, private_key: { env: TG_TEST_KEY }, private_key_id: k-2026 }
            """,
            environment: ["TG_TEST_KEY": key.pemRepresentation]
        )
        let built = try configuration.providers[0].oidcConfiguration(callbackURL: "https://gw.example/auth/callback")
        guard case .privateKeyJWT(_, let keyID, let algorithm, _) = built.clientAuthentication else {
            Issue.record("expected private_key_jwt")
            return
        }
        #expect(keyID == "k-2026")
        #expect(algorithm == .es256)
        // The key never shows up in a printed configuration.
        #expect(!"\(configuration.providers[0])".contains("PRIVATE KEY"))
    }

    @Test func anEntraCertificateCredentialNeedsNoKeyIDMustCertifyTheKeyAndReachesTheAssertion() async throws {
        let (certificatePath, keyPath, directory) = try await makeRSACertificate()
        defer { try? FileManager.default.removeItem(at: directory) }
        let entry = { (extra: String) in
            """
              - { name: corp, kind: entra, tenant: contoso.onmicrosoft.com, client_id: a, auth_method: private_key_jwt, private_key: { file: "\(keyPath)" }\(extra) }
            """
        }
        let configuration = try load(entry(", private_key_certificate: { file: \"\(certificatePath)\" }"))
        let built = try configuration.providers[0].oidcConfiguration(callbackURL: "https://gw.example/auth/callback")
        guard case .privateKeyJWT(_, let keyID, let algorithm, let certificate) = built.clientAuthentication else {
            Issue.record("expected private_key_jwt")
            return
        }
        #expect(keyID == "" && algorithm == .rs256)
        #expect(certificate == (try Certificate(pemRepresentation: try String(contentsOfFile: certificatePath, encoding: .utf8))))
        // Without a certificate the kid is required; a certificate of another key, or none that
        // parses, or one with a client secret, is refused.
        #expect(problems(entry("")) == ["providers[0].private_key_id: is required for kind entra (the kid the provider knows the key by)"])
        let other = FileManager.default.temporaryDirectory.appendingPathComponent("tg-other-\(UUID().uuidString).pem")
        try PrivateKey.generate(.rsa(bits: 2048)).pemRepresentation.write(to: other, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: other) }
        let mismatched = problems(
            """
              - { name: corp, kind: entra, tenant: contoso.onmicrosoft.com, client_id: a, auth_method: private_key_jwt, private_key: { file: "\(other.path)" }, private_key_certificate: { file: "\(certificatePath)" } }
            """
        )
        #expect(mismatched == ["providers[0].private_key_certificate: is not the certificate of private_key (their public keys differ)"])
        #expect(
            problems(entry(", private_key_certificate: \"not a certificate\"")) == [
                "providers[0].private_key_certificate: is not a PEM certificate (-----BEGIN CERTIFICATE-----)"
            ]
        )
        let withSecret = problems(
            """
              - { name: corp, kind: entra, tenant: contoso.onmicrosoft.com, client_id: a, client_secret: s, private_key_certificate: { file: "\(certificatePath)" } }
            """
        )
        #expect(withSecret == ["providers[0].private_key_certificate: applies to auth_method private_key_jwt only"])
    }
}
