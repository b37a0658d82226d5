import Foundation
import TGApp
import TGAppTesting
import TGAuth
import TGHTTPServer
import TGPostgres
import TGTesting
import Testing

/// Without its database TokenGate answers 503 with Retry-After, never a 500 or a stack of errors.
@Suite struct DatabaseOutageTests {
    @Test func authEndpointsAnswer503WhileTheDatabaseIsDown() async throws {
        let configuration = try AuthFlowHarness.loadConfiguration(
            """
            database: { url: "postgresql://127.0.0.1:\(try freeLoopbackPort())/gone", acquire_timeout_seconds: 1 }
            encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
            clients: [{ client_id: app, redirect_uris: ["com.example.app:/cb"] }]
            """
        )
        let database = TokenGateApp.makeDatabase(configuration)
        defer { database.shutdown() }
        let logs = CapturingLogSink()
        let auth = try TokenGateApp.makeAuthServices(configuration, database: database, providers: [], logger: capturingLogger(logs))
        let client = TestClient(
            Application(router: TokenGateApp.makeRouter(configuration, database: database, auth: auth), logger: capturingLogger(logs))
        )
        let token = await client.post(
            "/auth/token",
            form: [("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")]
        )
        #expect(token.status == 503)
        #expect(token.json["error"] as? String == "temporarily_unavailable")
        #expect(token.header("Retry-After") != nil)
        #expect(logs.lines.contains { $0.contains("database unavailable") && $0.contains(#""route":"/auth/token""#) })
        let me = await client.get("/auth/me", bearer: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        #expect(me.status == 503)
        #expect(me.json["code"] as? String == "database_unavailable")
        #expect(me.header("Retry-After") != nil)
    }
}
