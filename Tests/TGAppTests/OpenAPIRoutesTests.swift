import Foundation
import Logging
import TGApp
import TGAppTesting
import TGAuth
import TGCrypto
import TGPostgres
import Testing
import Yams

/// `openapi.yaml` describes exactly the routes TokenGate serves on its public port, and
/// `openapi-admin.yaml` exactly those of its admin listener.
@Suite struct OpenAPIRoutesTests {
    static let configuration = """
        database: { url: "postgresql://127.0.0.1:1/unused" }
        encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
        providers: [{ name: idp, kind: oidc, issuer: "https://idp.example", client_id: tg, client_secret: s }]
        upstreams: [{ name: graph, base_url: "https://graph.example/v1.0", provider: idp }]
        """

    /// The repository's OpenAPI document `name`.
    static func document(_ name: String) throws -> [String: Any] {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../\(name)")
        return try #require(try Yams.load(yaml: String(contentsOf: file, encoding: .utf8)) as? [String: Any])
    }

    /// Each operation of the document as `METHOD /path`.
    static func operations(_ document: [String: Any]) throws -> Set<String> {
        let paths = try #require(document["paths"] as? [String: Any])
        var described: Set<String> = []
        let methods = ["get", "put", "post", "delete", "patch", "head", "options"]
        for (path, item) in paths {
            for method in methods where (item as? [String: Any])?[method] != nil { described.insert("\(method.uppercased()) \(path)") }
        }
        return described
    }

    /// Each route of `router` as `METHOD /path`; a trailing `**` (the rest of the path) is `{path}` in OpenAPI.
    static func served(_ router: Router) -> Set<String> {
        Set(router.routes.map { "\($0.method) \($0.pattern.replacingOccurrences(of: "/**", with: "/{path}"))" })
    }

    @Test func everyRouteIsDescribedAndEveryDescribedOperationIsRouted() throws {
        let configuration = try AuthFlowHarness.loadConfiguration(Self.configuration)
        let database = TokenGateApp.makeDatabase(configuration)
        defer { database.shutdown() }
        let auth = try TokenGateApp.makeAuthServices(configuration, database: database, providers: [], logger: Logger(label: "test"))
        let router = TokenGateApp.makeRouter(configuration, database: database, auth: auth, metrics: TokenGateMetrics())
        let served = Self.served(router)
        let described = try Self.operations(try Self.document("openapi.yaml"))
        #expect(served.subtracting(described).sorted() == [], "routes missing from openapi.yaml")
        #expect(described.subtracting(served).sorted() == [], "openapi.yaml operations nobody serves")
    }

    @Test func everyAdminListenerRouteIsInTheAdminDocumentAndNothingElse() throws {
        let configuration = try AuthFlowHarness.loadConfiguration(Self.configuration)
        let database = TokenGateApp.makeDatabase(configuration)
        defer { database.shutdown() }
        let auth = try TokenGateApp.makeAuthServices(configuration, database: database, providers: [], logger: Logger(label: "test"))
        let router = TokenGateApp.makeAdminRouter(database: database, auth: auth, metrics: TokenGateMetrics())
        let served = Self.served(router)
        #expect(served.contains("GET /metrics"))
        let described = try Self.operations(try Self.document("openapi-admin.yaml"))
        #expect(served.subtracting(described).sorted() == [], "admin routes missing from openapi-admin.yaml")
        #expect(described.subtracting(served).sorted() == [], "openapi-admin.yaml operations the admin listener does not serve")
    }

    /// A head larger than a connection's memory gets libmicrohttpd's own 431 (414 when the request
    /// line alone is), whatever the operation, without `Content-Type` (`HTTPServerTests` checks
    /// those answers): every operation of both documents lists both, with no content, so that a
    /// client validating answers against the description accepts them.
    @Test func everyOperationListsTheServersOwn414And431WithoutContent() throws {
        let ownAnswers = ["414": "URITooLong", "431": "HeadTooLarge"]
        for name in ["openapi.yaml", "openapi-admin.yaml"] {
            let document = try Self.document(name)
            let components = try #require((document["components"] as? [String: Any])?["responses"] as? [String: Any])
            for component in ownAnswers.values {
                let answer = try #require(components[component] as? [String: Any], "\(name) has no \(component) response")
                #expect(answer["content"] == nil)
            }
            let paths = try #require(document["paths"] as? [String: Any])
            for (path, item) in paths {
                for (method, operation) in try #require(item as? [String: Any]) {
                    guard let responses = (operation as? [String: Any])?["responses"] as? [String: Any] else { continue }
                    for (status, component) in ownAnswers {
                        let reference = (responses[status] as? [String: Any])?["$ref"] as? String
                        #expect(reference == "#/components/responses/\(component)", "\(name): \(method.uppercased()) \(path) \(status)")
                    }
                }
            }
        }
    }

    @Test func theMetadataDocumentHasEveryFieldItsSchemaRequiresAndNoneItDoesNotDescribe() async throws {
        let document = try Self.document("openapi.yaml")
        let schemas = try #require((document["components"] as? [String: Any])?["schemas"] as? [String: Any])
        let schema = try #require(schemas["AuthorizationServerMetadata"] as? [String: Any])
        let properties = Set(try #require(schema["properties"] as? [String: Any]).keys)
        let required = Set(try #require(schema["required"] as? [String]))
        try await AuthFlowHarness.run { h in
            let metadata = try await h.get("/.well-known/oauth-authorization-server")
            #expect(metadata.status == 200)
            let emitted = Set(metadata.json.keys)
            #expect(emitted.subtracting(properties).sorted() == [], "metadata fields the schema does not describe")
            #expect(required.subtracting(emitted).sorted() == [], "required fields the metadata lacks")
        }
    }
}
