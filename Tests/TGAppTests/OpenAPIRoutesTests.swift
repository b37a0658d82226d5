import Foundation
import Logging
import TGApp
import TGAppTesting
import TGAuth
import TGCrypto
import TGPostgres
import Testing
import Yams

/// `openapi.yaml` describes exactly the routes TokenGate serves.
@Suite struct OpenAPIRoutesTests {
    @Test func everyRouteIsDescribedAndEveryDescribedOperationIsRouted() throws {
        let configuration = try AuthFlowHarness.loadConfiguration(
            """
            database: { url: "postgresql://127.0.0.1:1/unused" }
            encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
            providers: [{ name: idp, kind: oidc, issuer: "https://idp.example", client_id: tg, client_secret: s }]
            upstreams: [{ name: graph, base_url: "https://graph.example/v1.0", provider: idp }]
            """
        )
        let database = TokenGateApp.makeDatabase(configuration)
        defer { database.shutdown() }
        let auth = try TokenGateApp.makeAuthService(configuration, database: database, providers: [], logger: Logger(label: "test"))
        let router = TokenGateApp.makeRouter(configuration, database: database, auth: auth, metrics: TokenGateMetrics())
        // A trailing `**` (the rest of the path) is `{path}` in OpenAPI.
        let served = Set(router.routes.map { "\($0.method) \($0.pattern.replacingOccurrences(of: "/**", with: "/{path}"))" })

        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../openapi.yaml")
        let document = try #require(try Yams.load(yaml: String(contentsOf: file, encoding: .utf8)) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: Any])
        var described: Set<String> = []
        let methods = ["get", "put", "post", "delete", "patch", "head", "options"]
        for (path, item) in paths {
            for method in methods where (item as? [String: Any])?[method] != nil { described.insert("\(method.uppercased()) \(path)") }
        }
        #expect(served.subtracting(described).sorted() == [], "routes missing from openapi.yaml")
        #expect(described.subtracting(served).sorted() == [], "openapi.yaml operations nobody serves")
    }
}
