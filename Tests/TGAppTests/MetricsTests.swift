import Foundation
import HTTPTypes
import TGAppTesting
import TGAuth
import TGTesting
import Testing

/// `GET /metrics`: valid Prometheus text, and the counters move with what happens.
@Suite struct MetricsTests {
    /// One sample of the exposition, as the reference parser (`prometheus_client`) read it.
    struct Sample: Decodable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// Parses `text` with the Prometheus project's Python client; throws when it does not parse.
    static func parse(_ text: String) async throws -> [Sample] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-metrics-\(UUID().uuidString).txt")
        try text.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            out = []
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                for s in family.samples:
                    out.append({"name": s.name, "labels": s.labels, "value": s.value})
            print(json.dumps(out))
            """
        let parsed = try await runProcess("/usr/bin/env", ["python3", "-c", script, file.path])
        try #require(parsed.exitCode == 0, "prometheus_client could not parse /metrics: \(parsed.stderr)\n\(text)")
        return try JSONDecoder().decode([Sample].self, from: Data(parsed.stdout.utf8))
    }

    static func value(_ samples: [Sample], _ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }?.value
    }

    @Test func theExpositionParsesAndCountsRequestsRefreshOutcomesWaitsAndSweeps() async throws {
        try await AuthFlowHarness.run(settings: UpstreamTokenTests.rotatingProvider(), withGraphAPI: true) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            // The API's scope was not granted at login: the first calls refresh once, together.
            let first = try await UpstreamTokenTests.storm(harness, [nil], token: token, count: 20)
            #expect(first.allSatisfy { $0 == 200 })
            // In the refresh window the provider refuses the grant: a fatal outcome.
            harness.clock.advance(by: 100)
            harness.fake.misbehave(.error(code: "invalid_grant"), grantType: "refresh_token")
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 401)
            _ = await harness.client.execute(uri: "/nowhere", method: try #require(HTTPRequest.Method("FROB")))
            _ = try await harness.auth.sweeper.sweep()

            // Scraped where Prometheus scrapes it: the admin listener, over HTTP.
            let scrape = TestResponse(try await curl(["-i", harness.adminURL + "/metrics"]))
            #expect(scrape.status == 200)
            #expect(scrape.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
            let samples = try await Self.parse(scrape.body)
            let proxied = ["route": "/api/{upstream}/**", "method": "GET"]
            #expect(Self.value(samples, "tokengate_http_requests_total", proxied.merging(["status": "200"]) { $1 }) == 20)
            #expect(Self.value(samples, "tokengate_http_requests_total", proxied.merging(["status": "401"]) { $1 }) == 1)
            #expect(Self.value(samples, "tokengate_http_requests_total", ["route": "/auth/token", "status": "200"]) == 1)
            // A made-up method does not make a label value of its own.
            #expect(Self.value(samples, "tokengate_http_requests_total", ["route": "-", "method": "other"]) == 1)
            #expect(!samples.contains { $0.labels["method"] == "FROB" })
            #expect(Self.value(samples, "tokengate_http_request_duration_seconds_count", ["route": "/api/{upstream}/**"]) == 21)
            #expect(Self.value(samples, "tokengate_upstream_refreshes_total", ["provider": "fake", "outcome": "ok"]) == 1)
            #expect(Self.value(samples, "tokengate_upstream_refreshes_total", ["provider": "fake", "outcome": "fatal"]) == 1)
            #expect((Self.value(samples, "tokengate_upstream_refresh_waits_total", ["provider": "fake"]) ?? 0) >= 1)
            #expect(Self.value(samples, "tokengate_sweeps_total") == 1)
            #expect(Self.value(samples, "tokengate_sweeper_removed_total", ["kind": "sessions"]) != nil)
            #expect((Self.value(samples, "tokengate_db_pool_connections", ["state": "open"]) ?? 0) >= 1)
            #expect(Self.value(samples, "tokengate_cache_entries", ["kind": "sessions"]) != nil)
        }
    }
}
