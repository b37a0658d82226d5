import Foundation
import TGAppTesting
import TGHTTPClient
import TGHTTPServer
import TGOIDC
import TGPostgres
import TGTesting
import Testing

@testable import TGApp

/// The admin listener's `/readyz` reports each provider whose metadata could not be loaded.
@Suite struct ProviderReadinessTests {
    @Test func readyzNamesAProviderWhoseMetadataDoesNotLoad() async throws {
        let mock = try await OIDCProviderMock.start()
        defer { mock.stop() }
        let dead = try freeLoopbackPort()
        let text = """
            database: { url: "postgresql://127.0.0.1:1/nothing" }
            encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
            providers:
              - { name: mock, kind: oidc, issuer: "\(mock.issuer)", client_id: a, client_secret: s }
              - { name: dead, kind: oidc, issuer: "http://127.0.0.1:\(dead)", client_id: b, client_secret: s }
            """
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-ready-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try ConfigurationLoader.load(path: path, environment: [:])
        var clientSettings = HTTPClient.Configuration()
        clientSettings.allowPlainHTTPToLoopbackForTesting = true
        let providers = try TokenGateApp.makeProviders(configuration, httpClient: HTTPClient(configuration: clientSettings))
        let database = TokenGateApp.makeDatabase(configuration)
        defer { database.shutdown() }
        // The detail is the admin listener's.
        let router = TokenGateApp.makeAdminRouter(database: database, providers: providers)
        let result = await TestClient(Application(router: router, logger: capturingLogger(CapturingLogSink()))).get("/readyz")
        #expect(result.status == 503)
        let checks = decodeJSON(result.body)["checks"] as? [String: String]
        #expect(checks?["provider:mock"] == "ok")
        #expect(checks?["provider:dead"] == "failing")
    }

    @Test func aLoopbackProviderIsReachedOverPlainHTTPAndNothingElseIs() async throws {
        let mock = try await OIDCProviderMock.start()
        defer { mock.stop() }
        let local = try loadConfiguration(
            """
            database: { url: "postgresql://127.0.0.1:1/nothing" }
            providers: [{ name: mock, kind: oidc, issuer: "\(mock.issuer)", client_id: a, client_secret: s }]
            """
        )
        let providers = try TokenGateApp.makeProviders(local)
        let metadata = try await providers[0].metadata()
        #expect(metadata.issuer == mock.issuer)
        let remote = try loadConfiguration(
            """
            database: { url: "postgresql://127.0.0.1:1/nothing" }
            providers: [{ name: g, kind: google, client_id: a, client_secret: s }]
            """
        )
        #expect(TokenGateApp.providerClientSettings(remote).allowPlainHTTPToLoopbackForTesting == false)
        #expect(TokenGateApp.providerClientSettings(local).allowPlainHTTPToLoopbackForTesting == true)
    }

    func loadConfiguration(_ text: String) throws -> TokenGateConfiguration {
        try AuthFlowHarness.loadConfiguration(text)
    }
}
