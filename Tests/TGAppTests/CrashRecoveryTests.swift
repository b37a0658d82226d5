import Foundation
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A TokenGate process that dies in the middle of an upstream refresh.
/// Over real sockets: the other instance is a process of its own.
@Suite struct CrashRecoveryTests {
    /// The process is killed while it holds the grant's lock and waits for the provider;
    /// another instance, already waiting for that lock, goes on at once, refreshes with the stored
    /// refresh token and answers. The grant, the account and the session are all still there.
    @Test func aProcessKilledMidRefreshNeitherLosesTheGrantNorBlocksOtherInstances() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/me\"]", transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let port = try freeLoopbackPort()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-crash-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let configuration = directory.appendingPathComponent("tokengate.yaml")
            try """
            server: { host: 127.0.0.1, port: \(port) }
            admin: { port: 0 }
            database: { url: "\(harness.databaseURL)" }
            log: { level: warning }
            encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
            clients: [{ client_id: crash-app, redirect_uris: ["com.example.crash:/cb"] }]
            providers: [{ name: fake, kind: oidc, issuer: "\(harness.fake.issuer)", client_id: tokengate, client_secret: s3cret }]
            upstreams: [{ name: graph, base_url: "\(try #require(harness.graph).baseURL)", provider: fake, scopes: [User.Read], path_prefixes: ["/me"] }]
            """.write(to: configuration, atomically: true, encoding: .utf8)
            let log = directory.appendingPathComponent("serve.log")
            let process = try await TokenGateProcess.start(["serve", "--config", configuration.path], log: log)
            defer { kill(process.value.processIdentifier, SIGKILL) }
            try await eventually("the process serves") { try await curl(["-f", "http://127.0.0.1:\(port)/readyz"]).exitCode == 0 }

            // The provider takes its time with the dying process's refresh.
            let refreshes = { harness.fake.requests(to: "/token").filter { $0.form.contains { $0 == ("grant_type", "refresh_token") } }.count }
            let before = refreshes()
            harness.fake.misbehave(.delay(.seconds(5)), grantType: "refresh_token")
            let doomed = Task { try await curl(["-s", "http://127.0.0.1:\(port)/api/graph/me", "-H", "Authorization: Bearer \(token)"]) }
            try await eventually("the provider got the refresh") { refreshes() == before + 1 }
            // The dying process holds the grant's advisory lock; this instance now waits for it.
            try await eventually("the other process holds the grant's lock") {
                try await harness.count("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted") > 0
            }
            let waiting = Task { try await harness.get("/api/graph/me", bearer: token) }
            // Slept, not told: the grant's lock is taken by polling pg_try_advisory_lock
            // (PostgresAdvisoryLocks.swift), so a waiter leaves nothing to see in pg_locks.
            try await Task.sleep(for: .milliseconds(300))
            kill(process.value.processIdentifier, SIGKILL)
            let killedAt = ContinuousClock.now
            let answer = try await waiting.value
            #expect(answer.status == 200, "\(answer.body)")
            #expect(ContinuousClock.now - killedAt < .seconds(3))
            _ = try? await doomed.value
            #expect(try await harness.count("SELECT count(*) AS n FROM upstream_grants") == 1)
            #expect(try await harness.count("SELECT count(*) AS n FROM accounts WHERE state = 'active'") == 1)
            #expect(try await harness.count("SELECT count(*) AS n FROM sessions") == 1)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
        }
    }
}
