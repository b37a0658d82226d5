import Foundation
import TGApp
import TGAppTesting
import TGBase
import TGHTTPServer
import TGStore
import TGTesting
import Testing

/// The admin listener (docs/operations.md, "The admin listener"): what each port serves, over
/// real HTTP on loopback, and a start that cannot bind it.
@Suite struct AdminListenerTests {
    // MARK: - What each port serves

    @Test func thePublicPortAnswers404ForMetricsAndTheAdminListenerOnLoopbackServesThem() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { harness in
            let public404 = TestResponse(try await curl(["-i", harness.baseURL + "/metrics"]))
            #expect(public404.status == 404)
            #expect(public404.json["code"] as? String == "not_found")

            let scrape = TestResponse(try await curl(["-i", harness.adminURL + "/metrics"]))
            #expect(scrape.status == 200)
            #expect(scrape.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
            #expect(MetricsTests.value(try await MetricsTests.parse(scrape.body), "tokengate_db_pool_connections", ["state": "open"]) != nil)
            // The admin listener serves only its own routes, and its requests are not counted.
            #expect(TestResponse(try await curl(["-i", harness.adminURL + "/auth/login"])).status == 404)
            #expect(TestResponse(try await curl(["-i", harness.adminURL + "/healthz"])).status == 200)
            let samples = try await MetricsTests.parse(try await harness.scrapeMetrics())
            let counted = Set(samples.filter { $0.name == "tokengate_http_requests_total" }.compactMap { $0.labels["route"] })
            #expect(counted == ["-"], "only the public 404 is counted: \(counted)")

            // Bound to 127.0.0.1 (the default host), not to every address of the machine.
            let port = try #require(URL(string: harness.adminURL)?.port)
            let elsewhere = try await curl(["-o", "/dev/null", "http://127.0.0.2:\(port)/metrics"])
            #expect(elsewhere.exitCode == 7, "the admin listener answered on 127.0.0.2")
        }
    }

    /// An outsider on the public port learns only ready or not; the admin listener names the
    /// check that fails, and `tokengate_dependency_up` says it too. Both 503 while the database is
    /// down, both 200 once it is back.
    @Test func publicReadyzNamesNoCheckAdminReadyzNamesEachAndBothAre503WhileTheDatabaseIsDown() async throws {
        _ = try TestDatabase.adminURL()
        try await PrivateCluster.with { cluster, url in
            try await AuthFlowHarness.run(databaseURL: url, transport: .sockets) { harness in
                let ready = TestResponse(try await curl(["-i", harness.baseURL + "/readyz"]))
                #expect(ready.status == 200)
                #expect(ready.body == #"{"status":"ready"}"#)
                let detail = TestResponse(try await curl(["-i", harness.adminURL + "/readyz"]))
                #expect(detail.status == 200)
                #expect(detail.json["checks"] as? [String: String] == ["database": "ok", "provider:fake": "ok"])

                try await cluster.run("stop")
                let down = TestResponse(try await curl(["-i", harness.baseURL + "/readyz"]))
                #expect(down.status == 503)
                #expect(down.body == #"{"status":"not_ready"}"#)
                #expect(!down.body.contains("database") && !down.body.contains("provider"))
                let downDetail = TestResponse(try await curl(["-i", harness.adminURL + "/readyz"]))
                #expect(downDetail.status == 503)
                #expect(downDetail.json["status"] as? String == "not_ready")
                #expect(downDetail.json["checks"] as? [String: String] == ["database": "failing", "provider:fake": "ok"])
                let samples = try await MetricsTests.parse(try await harness.scrapeMetrics())
                #expect(MetricsTests.value(samples, "tokengate_dependency_up", ["dependency": "database"]) == 0)
                #expect(MetricsTests.value(samples, "tokengate_dependency_up", ["dependency": "provider:fake"]) == 1)

                try await cluster.run("start")
                try await eventually("the public port is ready again", every: .milliseconds(20)) {
                    try await curl(["-f", "-o", "/dev/null", harness.baseURL + "/readyz"]).exitCode == 0
                }
                #expect(TestResponse(try await curl(["-i", harness.adminURL + "/readyz"])).status == 200)
                let back = try await MetricsTests.parse(try await harness.scrapeMetrics())
                #expect(MetricsTests.value(back, "tokengate_dependency_up", ["dependency": "database"]) == 1)
            }
        }
    }

    // MARK: - Start

    /// Another server holds the admin port (with `SO_REUSEPORT`, as a TokenGate's public port
    /// does): the start fails naming the admin listener, and closes the public port it had bound.
    @Test func anAdminPortInUseFailsTheStartNamingTheAdminListener() async throws {
        try await AuthFlowHarness.run { harness in
            let occupant = try serve(Application(router: Router(), logger: capturingLogger(CapturingLogSink())))
            let publicPort = try freeLoopbackPort()
            do {
                let instance = try await AuthFlowHarness.Instance.start(
                    harness.configuration,
                    database: harness.database,
                    databaseURL: harness.databaseURL,
                    providers: harness.providers,
                    clock: harness.clock,
                    logs: harness.logs,
                    port: publicPort,
                    adminPort: occupant.port
                )
                await instance.stop()
                Issue.record("started with its admin port in use")
            } catch let error as Gateway.ListenerUnavailable {
                #expect(error.section == "admin")
                #expect(
                    error.description
                        == "cannot listen on 127.0.0.1:\(occupant.port) for the admin listener (admin.host, admin.port): Address already in use"
                )
            }
            #expect(try await curl(["-o", "/dev/null", "http://127.0.0.1:\(publicPort)/healthz"]).exitCode == 7, "the public port stayed open")
            await occupant.shutdown()
        }
    }

    /// `tokengate serve` says so and exits with 1.
    @Test func serveExitsWith1SayingWhichListenerCannotListen() async throws {
        try await TestDatabase.withFreshDatabase(migrations: SchemaMigrations.all) { _, url in
            let occupant = try serve(Application(router: Router(), logger: capturingLogger(CapturingLogSink())))
            let result = try await TokenGateProcess.run(
                ["serve"],
                environment: [
                    "TOKENGATE_DATABASE_URL": url, "TOKENGATE_SERVER_PORT": String(try freeLoopbackPort()),
                    "TOKENGATE_ADMIN_PORT": String(occupant.port),
                ]
            )
            await occupant.shutdown()
            #expect(result.status == 1)
            #expect(result.stdout.contains(#""message":"cannot listen""#), "\(result.stdout)")
            #expect(result.stdout.contains("for the admin listener (admin.host, admin.port): Address already in use"))
        }
    }
}
